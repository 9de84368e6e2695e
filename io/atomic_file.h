// Whole-file text I/O for the run folder's study files (attention dumps, scores.json, report.html).
// Writes go to PATH.tmp and are renamed over PATH, so a reader (or a crash) never sees a half-written file.
// Not for checkpoints (binary, owned by the trainer) and not for streaming logs (metrics.jsonl appends).
#pragma once

#include <string>

namespace io {

// The whole file as bytes; throws std::runtime_error("PATH: cannot read: REASON") on failure.
std::string read_text_file(const std::string& path);

// Writes `text` to PATH.tmp, flushes, then renames it to PATH; creates missing parent folders.
// Throws std::runtime_error("PATH: cannot write: REASON") and removes the temporary file on failure.
void write_text_file_atomically(const std::string& path, const std::string& text);

}  // namespace io
