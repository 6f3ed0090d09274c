#pragma once

// Abseil 20220623 ships no status macros; these are the two we use:
//   OUTBOX_RETURN_IF_ERROR(expr): returns the status if it is not OK.
//   OUTBOX_ASSIGN_OR_RETURN(lhs, expr): lhs = the value of a StatusOr, or
//   returns its status.
// An installed header uses only these prefixed names, so an adopter's own
// RETURN_IF_ERROR (or absl's, or another library's) never collides with
// them. The project's own sources (not its headers) also use the short
// names RETURN_IF_ERROR / ASSIGN_OR_RETURN, which exist only where
// OUTBOX_SHORT_STATUS_MACROS is defined: the project's CMake defines it for
// its directories, and the installed targets do not export it.
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define OUTBOX_CONCAT_INNER(a, b) a##b
#define OUTBOX_CONCAT(a, b) OUTBOX_CONCAT_INNER(a, b)

#define OUTBOX_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::absl::Status _outbox_status = (expr);          \
    if (!_outbox_status.ok()) return _outbox_status; \
  } while (0)

#define OUTBOX_ASSIGN_OR_RETURN(lhs, expr) \
  OUTBOX_ASSIGN_OR_RETURN_IMPL(OUTBOX_CONCAT(_outbox_statusor_, __LINE__), lhs, expr)

#define OUTBOX_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()

#ifdef OUTBOX_SHORT_STATUS_MACROS
#define RETURN_IF_ERROR(expr) OUTBOX_RETURN_IF_ERROR(expr)
#define ASSIGN_OR_RETURN(lhs, expr) OUTBOX_ASSIGN_OR_RETURN(lhs, expr)
#endif
