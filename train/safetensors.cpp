// Reading, validating and atomically writing safetensors files (see safetensors.h for the format).
// The reader trusts nothing in the file: every size is checked against the real file size before anything
// is allocated, so truncation, corrupt JSON or a hostile header give a one-line error, never a crash.
#include "train/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
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

// The 8-byte header length of a file of file_size bytes (at least 8): inside the file and under the limit.
void check_header_size(const std::string& path, uint64_t header_size, uint64_t file_size) {
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

// `data_sizes[i]` is the number of values tensors[i] holds, checked against its shape.
std::string build_header(const std::string& path, const std::vector<TensorSpec>& tensors,
                         const std::vector<uint64_t>& data_sizes,
                         const std::map<std::string, std::string>& metadata) {
  // ordered_json keeps the given order in the header too, so a human reading it sees the file's order.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    auto& m = header["__metadata__"] = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
  }
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorSpec& t = tensors[i];
    if (t.name.empty()) fail(path, "tensor name is empty", "tensor #" + std::to_string(seen.size()));
    if (t.name == "__metadata__") fail(path, "tensor name is reserved for the metadata", t.name);
    if (!seen.insert(t.name).second) fail(path, "tensor name appears twice", t.name);
    int64_t n = checked_numel(t.shape);
    if (n < 0) fail(path, "invalid shape " + ag::shape_str(t.shape), tensor_field(t.name, "shape"));
    if (static_cast<uint64_t>(n) != data_sizes[i])
      fail(path,
           "shape " + ag::shape_str(t.shape) + " holds " + std::to_string(n) + " values but data has " +
               std::to_string(data_sizes[i]),
           tensor_field(t.name, "data"));
    uint64_t end = offset + data_sizes[i] * kF32Bytes;
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
  Dtype dtype = Dtype::f32;
};

// Every safetensors dtype: its name in a header, the bytes of one value, whether read() converts it.
struct DtypeInfo {
  Dtype dtype;
  const char* name;
  uint64_t bytes;
  bool is_float;
};
constexpr DtypeInfo kDtypes[] = {
    {Dtype::f32, "F32", 4, true},          {Dtype::f16, "F16", 2, true},
    {Dtype::bf16, "BF16", 2, true},        {Dtype::f64, "F64", 8, true},
    {Dtype::boolean, "BOOL", 1, false},    {Dtype::u8, "U8", 1, false},
    {Dtype::i8, "I8", 1, false},           {Dtype::u16, "U16", 2, false},
    {Dtype::i16, "I16", 2, false},         {Dtype::u32, "U32", 4, false},
    {Dtype::i32, "I32", 4, false},         {Dtype::u64, "U64", 8, false},
    {Dtype::i64, "I64", 8, false},         {Dtype::f8_e4m3, "F8_E4M3", 1, false},
    {Dtype::f8_e5m2, "F8_E5M2", 1, false},
};

const DtypeInfo& dtype_info(Dtype dtype) {
  for (const DtypeInfo& d : kDtypes)
    if (d.dtype == dtype) return d;
  throw std::logic_error("safetensors: a Dtype missing from kDtypes");
}

std::string dtype_names() {
  std::string s;
  for (const DtypeInfo& d : kDtypes) s += std::string(s.empty() ? "" : ", ") + d.name;
  return s;
}

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

// `any_dtype`: every safetensors dtype is accepted (the mapped reader, which converts the floats and refuses
// to read the others); otherwise F32 only (attograd's own checkpoints).
Entry parse_entry(const std::string& path, const std::string& name, const json& j, uint64_t data_size,
                  bool any_dtype) {
  if (!j.is_object()) fail(path, "tensor entry must be an object with dtype, shape, data_offsets", name);
  for (const auto& item : j.items())
    if (item.key() != "dtype" && item.key() != "shape" && item.key() != "data_offsets")
      fail(path, "unexpected field \"" + item.key() + "\"", name);
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!j.contains(key)) fail(path, std::string("missing field \"") + key + "\"", name);

  const json& dtype = j["dtype"];
  if (!dtype.is_string()) fail(path, "dtype must be a string", tensor_field(name, "dtype"));
  Entry e;
  e.name = name;
  const std::string dtype_name = dtype.get<std::string>();
  const DtypeInfo* info = nullptr;
  for (const DtypeInfo& d : kDtypes)
    if (dtype_name == d.name && (any_dtype || d.dtype == Dtype::f32)) info = &d;
  if (!info)
    fail(path,
         "dtype " + dtype_name + " is not " +
             (any_dtype ? "a safetensors dtype (" + dtype_names() + ")" : "supported, only F32"),
         tensor_field(name, "dtype"));
  e.dtype = info->dtype;
  const uint64_t value_bytes = dtype_bytes(e.dtype);
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
  if (span % value_bytes != 0 || span / value_bytes != static_cast<uint64_t>(n))
    fail(path,
         "data_offsets span " + std::to_string(span) + " bytes but shape " + ag::shape_str(e.shape) +
             " needs " + std::to_string(n) + " " + dtype_name + " values of " + std::to_string(value_bytes) +
             " bytes",
         field);
  return e;
}

// The header, checked against the file: returns the entries sorted by offset after verifying that they
// tile [0, data_size) exactly, with no overlap, gap or trailing bytes.
std::vector<Entry> parse_header(const std::string& path, const std::string& text, uint64_t data_size,
                                std::map<std::string, std::string>& metadata, bool any_dtype = false) {
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
    entries.push_back(parse_entry(path, key, value, data_size, any_dtype));
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

namespace {

void write_header(io::AtomicFile& file, const std::string& header) {
  unsigned char size_bytes[8];
  for (int i = 0; i < 8; ++i) size_bytes[i] = static_cast<unsigned char>(uint64_t(header.size()) >> (8 * i));
  file.write(size_bytes, 8);
  file.write(header);
}

}  // namespace

void write_safetensors(const std::string& path, const std::vector<NamedArray>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<TensorSpec> specs;
  std::vector<uint64_t> sizes;
  for (const NamedArray& t : tensors) {
    specs.push_back({t.name, t.shape});
    sizes.push_back(t.data.size());
  }
  const std::string header = build_header(path, specs, sizes, metadata);
  io::AtomicFile file(path);
  write_header(file, header);
  for (const NamedArray& t : tensors) file.write(t.data.data(), t.data.size() * kF32Bytes);
  file.commit();
}

void write_safetensors_streamed(const std::string& path, const std::vector<TensorSpec>& tensors,
                                const std::map<std::string, std::string>& metadata,
                                const std::function<void(size_t, std::vector<float>&)>& fill) {
  std::vector<uint64_t> sizes;
  for (const TensorSpec& t : tensors) {
    const int64_t n = checked_numel(t.shape);
    if (n < 0) fail(path, "invalid shape " + ag::shape_str(t.shape), tensor_field(t.name, "shape"));
    sizes.push_back(static_cast<uint64_t>(n));
  }
  const std::string header = build_header(path, tensors, sizes, metadata);
  io::AtomicFile file(path);
  write_header(file, header);
  std::vector<float> data;
  for (size_t i = 0; i < tensors.size(); ++i) {
    data.assign(sizes[i], 0.0f);
    fill(i, data);
    if (data.size() != sizes[i])
      fail(path, "the tensor's values changed size while it was written", tensors[i].name);
    file.write(data.data(), data.size() * kF32Bytes);
  }
  file.commit();
}

namespace {

// Reads the header, then the data: into each NamedArray's own vector (with_data), or after check(header)
// into destination(tensor) when destination is given, or not at all.
SafetensorsFile read_file(const std::string& path, bool with_data,
                          const std::function<void(const SafetensorsFile&)>& check = nullptr,
                          const std::function<float*(const NamedArray&)>& destination = nullptr) {
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
  check_header_size(path, header_size, file_size);

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
  if (destination) {
    check(file);
    for (size_t i = 0; i < entries.size(); ++i)  // in file order: one sequential read
      if (!in.read(reinterpret_cast<char*>(destination(file.tensors[i])),
                   static_cast<std::streamsize>(entries[i].end - entries[i].begin)))
        fail(path, "file ended early", tensor_field(file.tensors[i].name, "data"));
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

SafetensorsFile read_safetensors_into(const std::string& path,
                                      const std::function<void(const SafetensorsFile&)>& check,
                                      const std::function<float*(const NamedArray&)>& destination) {
  return read_file(path, false, check, destination);
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

// ---------------------------------------------------------------------------------------------------------
// The mapped reader

namespace {

// IEEE half to float: sign, 5-bit exponent, 10-bit mantissa; subnormals, infinities and NaN kept.
float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu, bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {  // subnormal: shift the mantissa up until its leading 1 is the implicit bit
    exponent = 113;
    while (!(mantissa & 0x400u)) {
      mantissa <<= 1;
      --exponent;
    }
    bits = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace

MappedSafetensors::MappedSafetensors(const std::string& path) : path_(path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) fail(path, "no such file", "file");
  if (!fs::is_regular_file(st)) fail(path, "is not a regular file", "file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno), "file");
  struct stat sb {};
  if (::fstat(fd, &sb) != 0) {
    const int err = errno;
    ::close(fd);
    fail(path, std::string("cannot get its size: ") + std::strerror(err), "file");
  }
  size_ = static_cast<uint64_t>(sb.st_size);
  if (size_ < 8) {
    ::close(fd);
    fail(path, "file is " + std::to_string(size_) + " bytes, too short for the 8-byte header size",
         "header size");
  }
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);  // the mapping keeps the file
  if (p == MAP_FAILED) fail(path, std::string("cannot map: ") + std::strerror(err), "file");
  base_ = static_cast<const unsigned char*>(p);

  try {
    const uint64_t header_size = read_u64_le(base_);
    check_header_size(path, header_size, size_);
    data_ = base_ + 8 + header_size;
    const std::string text(reinterpret_cast<const char*>(base_ + 8), header_size);
    for (Entry& e : parse_header(path, text, size_ - 8 - header_size, metadata_, true))
      tensors_.push_back({std::move(e.name), std::move(e.shape), e.dtype, e.begin, e.end});
  } catch (...) {
    ::munmap(const_cast<unsigned char*>(base_), size_);
    throw;
  }
  // The tensors are read once each, front to back.
  ::madvise(const_cast<unsigned char*>(base_), size_, MADV_SEQUENTIAL);
}

MappedSafetensors::~MappedSafetensors() {
  if (base_) ::munmap(const_cast<unsigned char*>(base_), size_);
}

const MappedSafetensors::Tensor* MappedSafetensors::find(const std::string& name) const {
  for (const Tensor& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

void MappedSafetensors::read(const Tensor& t, float* out) const {
  const unsigned char* p = data_ + t.begin;
  if (!dtype_is_float(t.dtype))
    fail(path_,
         std::string("dtype ") + dtype_name(t.dtype) + " cannot be read as weights (F32, F16, BF16 or F64)",
         tensor_field(t.name, "dtype"));
  const uint64_t n = (t.end - t.begin) / dtype_bytes(t.dtype);
  if (n == 0) return;  // an empty tensor: out may be null (an empty vector's data()), and memcpy's may not
  switch (t.dtype) {
    case Dtype::f32:
      std::memcpy(out, p, n * 4);
      break;
    case Dtype::f16:
      for (uint64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        out[i] = half_to_float(h);
      }
      break;
    case Dtype::bf16:  // the upper 16 bits of a float
      for (uint64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        const uint32_t bits = static_cast<uint32_t>(h) << 16;
        std::memcpy(out + i, &bits, 4);
      }
      break;
    case Dtype::f64:  // rounded to the nearest float
      for (uint64_t i = 0; i < n; ++i) {
        double d;
        std::memcpy(&d, p + 8 * i, 8);
        out[i] = static_cast<float>(d);
      }
      break;
    default:  // not a float: refused above
      break;
  }
}

void MappedSafetensors::release(const Tensor& t) const {
  // Whole pages inside the tensor's bytes: their file pages leave this process's resident set.
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data_ + t.begin) + page - 1) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(data_ + t.end) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

const char* dtype_name(Dtype dtype) {
  return dtype_info(dtype).name;
}

uint64_t dtype_bytes(Dtype dtype) {
  return dtype_info(dtype).bytes;
}

bool dtype_is_float(Dtype dtype) {
  return dtype_info(dtype).is_float;
}

}  // namespace train
