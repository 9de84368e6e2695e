// A model input typed by a person: "--tokens" (the task's token names, e.g. "BOS 3 1 4") or "--ids" (raw
// token ids, "0 5 3 6"), split on white space and checked against the task's vocabulary. Errors name the
// argument and the bad token. The input's length against the model's max_len is the caller's to check.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/tasks.h"

namespace train {

std::vector<int32_t> parse_token_names(const Task& task, const std::string& text,
                                       const std::string& argument);
std::vector<int32_t> parse_token_ids(int vocab, const std::string& text, const std::string& argument);

}  // namespace train
