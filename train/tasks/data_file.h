// Reading the data files of the kinds that read one (sequences, text): a regular file, its size bounded
// before a byte is read, each problem a TaskDataError blaming a /task field.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "train/task.h"
#include "train/tokenizer.h"

namespace train {
namespace tasks {

// The whole file at `path`. Throws TaskDataError(field, ...) naming the file when it is missing, not a
// regular file (a FIFO, a device or a folder would block or never end), unreadable, or over max_bytes.
std::string read_data_file(const std::string& path, int64_t max_bytes, const std::string& field);

// The name a token of a text file gets: the character itself, or an escape for white space, control
// characters, the backslash and (for bytes) anything outside ASCII: \s (space), \n, \t, \r, \\, \xNN,
// \u{NNNN}. Names never hold white space, so --tokens can name every token.
std::string text_token_name(uint32_t code_point, bool is_byte);

// Appends a code point (at most 0x10FFFF) to `out` as UTF-8.
void append_utf8(std::string& out, uint32_t code_point);

// A task's tokenizer (task.tokenizer, train/tokenizer.h); its errors become TaskDataError(field, ...).
std::shared_ptr<const Tokenizer> load_task_tokenizer(const std::string& path, const std::string& field);
// The token table of a tokenizer's vocabulary: bpe_token_name of each token's bytes, with "#ID" after a
// name an earlier id already has (an added token spelled as a vocabulary token).
std::vector<std::string> tokenizer_token_names(const Tokenizer& tokenizer);

// The kinds that read a file, built from the file's text (what their registry entries do after
// read_data_file; the fuzz targets call these directly). Throw TaskDataError; prepare() is the caller's.
std::unique_ptr<Task> make_sequences_task(const TaskConfig& config, const std::string& text);
std::unique_ptr<Task> make_text_task(const TaskConfig& config, const std::string& text);

}  // namespace tasks
}  // namespace train
