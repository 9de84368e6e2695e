// Reading, validating and atomically writing safetensors files (see safetensors.h for the format).
// The reader trusts nothing in the file: every size is checked against the real file size before anything
// is allocated, so truncation, corrupt JSON or a hostile header give a one-line error, never a crash.
#include "train/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <tuple>

#include "autograd/tensor.h"
#include "io/atomic_file.h"
#include "io/json_read.h"
#include "io/printable.h"

// Tensor bytes are copied straight between memory and the file, and safetensors is little-endian.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors I/O assumes a little-endian host");
static_assert(sizeof(float) == 4, "F32 tensors need a 4-byte float");

namespace train {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// A header is about 100 bytes per tensor plus the metadata (a config of about 1 KB): 8 MB is over 50,000
// tensors, far beyond any model here. The reference implementation allows 100 MB, whose JSON costs GBs to
// parse.
constexpr uint64_t kMaxHeaderBytes = 8'000'000;
constexpr uint64_t kF32Bytes = 4;

// Control characters or bytes that are not UTF-8, in names or parser messages, would break the one-line
// error rule: printable escapes them.
[[noreturn]] void fail(const std::string& path, const std::string& what, const std::string& field) {
  throw std::runtime_error(io::printable(path + ": " + what + " (" + field + ")"));
}

std::string tensor_field(const std::string& name, const char* field) {
  return name + ": " + field;
}

// numel of a shape, or -1 if it would not fit in int64 (so no caller can overflow on it).
int64_t checked_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d == 0) return 0;
  }
  for (int64_t d : shape) {
    if (n > std::numeric_limits<int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

// ---------------------------------------------------------------------------------------------------------
// Writing

std::string build_header(const std::string& path, const std::vector<NamedArray>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  // ordered_json keeps the given order in the header too, so a human reading it sees the file's order.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    auto& m = header["__metadata__"] = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
  }
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const NamedArray& t : tensors) {
    if (t.name.empty()) fail(path, "tensor name is empty", "tensor #" + std::to_string(seen.size()));
    if (t.name == "__metadata__") fail(path, "tensor name is reserved for the metadata", t.name);
    if (!seen.insert(t.name).second) fail(path, "tensor name appears twice", t.name);
    int64_t n = checked_numel(t.shape);
    if (n < 0) fail(path, "invalid shape " + ag::shape_str(t.shape), tensor_field(t.name, "shape"));
    if (static_cast<uint64_t>(n) != t.data.size())
      fail(path,
           "shape " + ag::shape_str(t.shape) + " holds " + std::to_string(n) + " values but data has " +
               std::to_string(t.data.size()),
           tensor_field(t.name, "data"));
    uint64_t end = offset + t.data.size() * kF32Bytes;
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {  // a name or value that is not UTF-8
    fail(path, std::string("cannot encode the header: ") + e.what(), "header");
  }
  // Spaces are the padding the format allows; they align the data section to 8 bytes for mmap readers.
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

// ---------------------------------------------------------------------------------------------------------
// Reading

struct Entry {
  std::string name;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

uint64_t read_u64_le(const unsigned char* b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | b[i];
  return v;
}

std::vector<int64_t> parse_shape(const std::string& path, const std::string& name, const json& j) {
  const std::string field = tensor_field(name, "shape");
  if (!j.is_array()) fail(path, "shape must be an array of non-negative integers", field);
  std::vector<int64_t> shape;
  for (const json& d : j) {
    if (d.is_number_integer() && !d.is_number_unsigned()) fail(path, "shape has a negative dimension", field);
    if (!d.is_number_unsigned()) fail(path, "shape must be an array of non-negative integers", field);
    uint64_t v = d.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(path, "shape dimension " + std::to_string(v) + " is too large", field);
    shape.push_back(static_cast<int64_t>(v));
  }
  return shape;
}

Entry parse_entry(const std::string& path, const std::string& name, const json& j, uint64_t data_size) {
  if (!j.is_object()) fail(path, "tensor entry must be an object with dtype, shape, data_offsets", name);
  for (const auto& item : j.items())
    if (item.key() != "dtype" && item.key() != "shape" && item.key() != "data_offsets")
      fail(path, "unexpected field \"" + item.key() + "\"", name);
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!j.contains(key)) fail(path, std::string("missing field \"") + key + "\"", name);

  const json& dtype = j["dtype"];
  if (!dtype.is_string()) fail(path, "dtype must be a string", tensor_field(name, "dtype"));
  if (dtype.get<std::string>() != "F32")
    fail(path, "dtype " + dtype.get<std::string>() + " is not supported, only F32",
         tensor_field(name, "dtype"));

  Entry e;
  e.name = name;
  e.shape = parse_shape(path, name, j["shape"]);

  const std::string field = tensor_field(name, "data_offsets");
  const json& off = j["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    fail(path, "data_offsets must be [begin, end] of non-negative integers", field);
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  if (e.begin > e.end)
    fail(path, "data_offsets begin " + std::to_string(e.begin) + " is after end " + std::to_string(e.end),
         field);
  if (e.end > data_size)
    fail(path,
         "data_offsets end " + std::to_string(e.end) + " is beyond the data section's " +
             std::to_string(data_size) + " bytes",
         field);
  const int64_t n = checked_numel(e.shape);
  if (n < 0)
    fail(path, "shape " + ag::shape_str(e.shape) + " has more elements than fit in 64 bits",
         tensor_field(name, "shape"));
  // Compared by division so that no product can overflow.
  const uint64_t span = e.end - e.begin;
  if (span % kF32Bytes != 0 || span / kF32Bytes != static_cast<uint64_t>(n))
    fail(path,
         "data_offsets span " + std::to_string(span) + " bytes but shape " + ag::shape_str(e.shape) +
             " needs " + std::to_string(n) + " F32 values of 4 bytes",
         field);
  return e;
}

// The header, checked against the file: returns the entries sorted by offset after verifying that they
// tile [0, data_size) exactly, with no overlap, gap or trailing bytes.
std::vector<Entry> parse_header(const std::string& path, const std::string& text, uint64_t data_size,
                                std::map<std::string, std::string>& metadata) {
  json header;
  try {
    header = io::parse_json_text(text, "header");  // the one bounded reader: nesting, NUL, duplicate keys
  } catch (const io::JsonError& e) {               // parse errors, and numbers out of range (1e400)
    fail(path, std::string("header is not valid JSON: ") + e.what(), "header");
  }
  if (!header.is_object()) fail(path, "header must be a JSON object", "header");

  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) fail(path, "__metadata__ must be an object of strings", "__metadata__");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) fail(path, "metadata value must be a string", "__metadata__." + mk);
        metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(path, key, value, data_size));
  }

  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  uint64_t covered = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < covered)
      fail(path, "data_offsets overlap those of \"" + previous->name + "\"",
           tensor_field(e.name, "data_offsets"));
    if (e.begin > covered)
      fail(path,
           "data_offsets leave bytes [" + std::to_string(covered) + ", " + std::to_string(e.begin) +
               ") of the data section unused",
           tensor_field(e.name, "data_offsets"));
    covered = e.end;
    previous = &e;
  }
  if (covered != data_size)
    fail(path,
         "tensors cover " + std::to_string(covered) + " bytes but the data section has " +
             std::to_string(data_size),
         "data section");
  return entries;
}

}  // namespace

const NamedArray* SafetensorsFile::find(const std::string& name) const {
  for (const NamedArray& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

void write_safetensors(const std::string& path, const std::vector<NamedArray>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::string header = build_header(path, tensors, metadata);
  unsigned char size_bytes[8];
  for (int i = 0; i < 8; ++i) size_bytes[i] = static_cast<unsigned char>(uint64_t(header.size()) >> (8 * i));

  io::AtomicFile file(path);
  file.write(size_bytes, 8);
  file.write(header);
  for (const NamedArray& t : tensors) file.write(t.data.data(), t.data.size() * kF32Bytes);
  file.commit();
}

namespace {

SafetensorsFile read_file(const std::string& path, bool with_data) {
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) fail(path, "no such file", "file");
  if (fs::is_directory(st)) fail(path, "is a directory, expected a safetensors file", "file");
  // A FIFO would block the read for ever; a device has no size to check the header against.
  if (!fs::is_regular_file(st)) fail(path, "is not a regular file (a FIFO, device or socket)", "file");
  uint64_t file_size = fs::file_size(path, ec);
  if (ec) fail(path, "cannot get its size: " + ec.message(), "file");

  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, std::string("cannot open: ") + std::strerror(errno), "file");
  if (file_size < 8)
    fail(path, "file is " + std::to_string(file_size) + " bytes, too short for the 8-byte header size",
         "header size");
  unsigned char size_bytes[8];
  if (!in.read(reinterpret_cast<char*>(size_bytes), 8)) fail(path, "file ended early", "header size");
  const uint64_t header_size = read_u64_le(size_bytes);
  if (header_size > file_size - 8)
    fail(path,
         "header size " + std::to_string(header_size) + " is beyond the file's remaining " +
             std::to_string(file_size - 8) + " bytes (truncated or not a safetensors file)",
         "header size");
  if (header_size > kMaxHeaderBytes)
    fail(path,
         "header size " + std::to_string(header_size) + " is over the limit of " +
             std::to_string(kMaxHeaderBytes) + " bytes",
         "header size");

  std::string text(header_size, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(header_size)))
    fail(path, "file ended early", "header");
  SafetensorsFile file;
  const uint64_t data_size = file_size - 8 - header_size;
  std::vector<Entry> entries = parse_header(path, text, data_size, file.metadata);

  // The entries tile the data section, which the file really holds, so these allocations are bounded by it.
  file.tensors.reserve(entries.size());
  for (Entry& e : entries) {
    NamedArray t{std::move(e.name), std::move(e.shape), {}};
    if (with_data) {
      t.data.resize((e.end - e.begin) / kF32Bytes);
      if (!in.read(reinterpret_cast<char*>(t.data.data()), static_cast<std::streamsize>(e.end - e.begin)))
        fail(path, "file ended early", tensor_field(t.name, "data"));
    }
    file.tensors.push_back(std::move(t));
  }
  return file;
}

}  // namespace

SafetensorsFile read_safetensors(const std::string& path) {
  return read_file(path, true);
}

SafetensorsFile read_safetensors_header(const std::string& path) {
  return read_file(path, false);
}

void expect_tensors(const SafetensorsFile& file,
                    const std::vector<std::pair<std::string, std::vector<int64_t>>>& expected,
                    const std::string& path) {
  std::set<std::string> names;
  for (const auto& [name, shape] : expected) {
    names.insert(name);
    const NamedArray* t = file.find(name);
    if (!t) fail(path, "missing tensor, expected shape " + ag::shape_str(shape), name);
    if (t->shape != shape)
      fail(path, "shape mismatch: expected " + ag::shape_str(shape) + ", found " + ag::shape_str(t->shape),
           name);
  }
  for (const NamedArray& t : file.tensors)
    if (!names.count(t.name)) fail(path, "unexpected tensor of shape " + ag::shape_str(t.shape), t.name);
}

std::string u64_to_metadata(uint64_t value) {
  return std::to_string(value);
}

std::string f64_bits_to_metadata(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return u64_to_metadata(bits);
}

const std::string& metadata_string(const SafetensorsFile& file, const std::string& key,
                                   const std::string& path) {
  auto it = file.metadata.find(key);
  if (it == file.metadata.end()) fail(path, "missing metadata key", "__metadata__." + key);
  return it->second;
}

uint64_t metadata_u64(const SafetensorsFile& file, const std::string& key, const std::string& path) {
  const std::string& s = metadata_string(file, key, path);
  uint64_t v = 0;
  const char* end = s.data() + s.size();
  auto [ptr, err] = std::from_chars(s.data(), end, v);
  if (s.empty() || err != std::errc() || ptr != end)
    fail(path, "metadata value \"" + s + "\" is not an unsigned 64-bit decimal integer",
         "__metadata__." + key);
  return v;
}

double metadata_f64_bits(const SafetensorsFile& file, const std::string& key, const std::string& path) {
  uint64_t bits = metadata_u64(file, key, path);
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}

}  // namespace train
