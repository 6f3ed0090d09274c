#pragma once

// The payment ids one run hands to the next (--write_ids, --expect_ids):
// one id a line.
#include <string>
#include <vector>

#include "client/create_load.h"

namespace outbox::demo {

// Appends the file's ids to `ids`; false if it cannot be read.
bool ReadIds(const std::string& path, std::vector<std::string>* ids);

// Writes the ids of the created payments (those with one); false on failure.
bool WriteIds(const std::string& path, const std::vector<client::Created>& created);

}  // namespace outbox::demo
