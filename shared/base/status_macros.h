#pragma once

// Abseil 20220623 ships no status macros; these are the two we use.
#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define OUTBOX_CONCAT_INNER(a, b) a##b
#define OUTBOX_CONCAT(a, b) OUTBOX_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                        \
  do {                                               \
    ::absl::Status _outbox_status = (expr);          \
    if (!_outbox_status.ok()) return _outbox_status; \
  } while (0)

#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL(OUTBOX_CONCAT(_outbox_statusor_, __LINE__), lhs, expr)

#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()
