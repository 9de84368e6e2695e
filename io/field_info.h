// A row of a field table (io/field_table.h) as a docs page's field table shows it; its own header so
// that an API listing its fields (train/config.h's config_fields()) need not include the tables.
#pragma once

#include <string>

namespace io {

// One row of a table as a docs field table shows it.
struct FieldInfo {
  std::string path;           // "train.steps"
  std::string type;           // "integer", "number", "boolean", "string", "array of integers", ...
  std::string default_value;  // the default as JSON: 3000, 0.001, "cosine", false
  std::string default_means;  // what the default stands for ("the task's T"), or ""
  std::string valid;          // the values accepted (">= 1", "not empty", ...), or "any" (of its type)
  std::string meaning;        // one line
  bool resume_settable;       // the row is kResumable
};

}  // namespace io
