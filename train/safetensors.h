// The checkpoint file format: safetensors (https://huggingface.co/docs/safetensors). attograd writes and
// reads its own checkpoints in F32 only; MappedSafetensors (below) reads other programs' F32, F16 and BF16.
// A file is an 8-byte little-endian u64 N, then N bytes of JSON header
//   {"__metadata__": {str: str}, name: {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...}
// padded with spaces so the data starts at a multiple of 8, then the raw little-endian tensor bytes with
// offsets relative to the start of that data section.
//
// This file only reads and writes such files and checks their names and shapes. It knows no model, optimiser
// or RNG: those are flattened to NamedArrays (and integers in the metadata, via the helpers below) by the
// checkpoint code. Every error is a std::runtime_error with one line: `<path>: <what is wrong> (<field>)`.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace train {

// One named tensor, row-major, in PyTorch's dimension order.
struct NamedArray {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> data;  // numel(shape) values
};

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;
  std::vector<NamedArray> tensors;  // in the order of their data in the file (the order they were written)

  // The tensor with this name, or nullptr.
  const NamedArray* find(const std::string& name) const;
};

// Writes `tensors` (in the given order) and `metadata` to `path` atomically: the bytes go to `path + ".tmp"`,
// which is synced and then renamed over `path`; the directory is synced last. On failure the temp file is
// removed, an existing file at `path` is left as it was, and std::runtime_error names the file.
void write_safetensors(const std::string& path, const std::vector<NamedArray>& tensors,
                       const std::map<std::string, std::string>& metadata);

// A tensor's name and shape, for a file whose values are produced one tensor at a time.
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
};

// Writes an F32 file like write_safetensors, but holds one tensor's values at a time: `fill(i, values)` puts
// tensors[i]'s values (already sized to its shape's count) into `values` just before they are written.
void write_safetensors_streamed(const std::string& path, const std::vector<TensorSpec>& tensors,
                                const std::map<std::string, std::string>& metadata,
                                const std::function<void(size_t, std::vector<float>&)>& fill);

// Reads and validates a whole file. The header is checked completely (sizes, JSON, dtypes, shapes, offsets
// that tile the data section exactly) before any tensor memory is allocated, so a corrupt or hostile file
// costs at most its header and never crashes.
SafetensorsFile read_safetensors(const std::string& path);
// The same checks, reading only the header: the tensors have their names and shapes but no data.
SafetensorsFile read_safetensors_header(const std::string& path);
// Reads the header with the same checks, passes it to `check` (which throws to refuse the file, e.g.
// expect_tensors), then reads each tensor's values straight into `destination(tensor)` (room for the
// shape's count of floats): no second copy of the data. Returns the header.
SafetensorsFile read_safetensors_into(const std::string& path,
                                      const std::function<void(const SafetensorsFile&)>& check,
                                      const std::function<float*(const NamedArray&)>& destination);

// Checks that `file` holds exactly the `expected` tensors (any order) with these shapes; throws on the first
// missing tensor, shape mismatch (naming both shapes) or unexpected tensor. `path` is named in the error.
void expect_tensors(const SafetensorsFile& file,
                    const std::vector<std::pair<std::string, std::vector<int64_t>>>& expected,
                    const std::string& path);

// Metadata values are strings. Integers (optimiser step, RNG words) go in as decimal strings, and a double
// that must survive bit-exactly (the RNG's cached normal) as the decimal string of its 64 bits.
std::string u64_to_metadata(uint64_t value);
std::string f64_bits_to_metadata(double value);
// Reads them back; throws `<path>: <what> (<key>)` if the key is missing or is not a plain decimal u64.
const std::string& metadata_string(const SafetensorsFile& file, const std::string& key,
                                   const std::string& path);
uint64_t metadata_u64(const SafetensorsFile& file, const std::string& key, const std::string& path);
double metadata_f64_bits(const SafetensorsFile& file, const std::string& key, const std::string& path);

// The element types of the safetensors format. A mapped file may hold any of them; F32, F16, BF16 and F64
// are converted to float32 on reading. The others name a model's buffers (GPT-Neo's and Pythia's boolean
// causal masks, integer position ids), which an importer skips: reading one is an error.
enum class Dtype { f32, f16, bf16, f64, boolean, u8, i8, u16, i16, u32, i32, u64, i64, f8_e4m3, f8_e5m2 };
const char* dtype_name(Dtype dtype);  // as the format spells it: "F32", "BOOL", "F8_E4M3", ...
uint64_t dtype_bytes(Dtype dtype);    // the bytes of one value
bool dtype_is_float(Dtype dtype);     // read() converts it to float32

// A safetensors file written by anyone (Hugging Face's F32, F16 or BF16 checkpoints), mapped read-only
// rather than read into memory: a tensor's bytes are touched only when it is read, and release() hands its
// pages back, so reading a model costs one tensor at a time, not the file. The header gets every check of
// read_safetensors (sizes, offsets tiling the data section, dtype, shape and byte count agreeing) before
// any tensor is touched; errors are one line `<path>: <what> (<tensor>: <field>)`.
class MappedSafetensors {
 public:
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;
    Dtype dtype = Dtype::f32;
    uint64_t begin = 0, end = 0;  // bytes in the data section
  };

  explicit MappedSafetensors(const std::string& path);
  ~MappedSafetensors();
  MappedSafetensors(const MappedSafetensors&) = delete;
  MappedSafetensors& operator=(const MappedSafetensors&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::vector<Tensor>& tensors() const { return tensors_; }  // in the order of their data
  const Tensor* find(const std::string& name) const;               // nullptr when absent
  // The tensor's values as float32 into out[0 .. numel); throws for a dtype that is not a float.
  void read(const Tensor& tensor, float* out) const;
  // Drops the tensor's pages from memory (they are read again from the file if touched).
  void release(const Tensor& tensor) const;

 private:
  std::string path_;
  const unsigned char* base_ = nullptr;
  const unsigned char* data_ = nullptr;
  uint64_t size_ = 0;
  std::map<std::string, std::string> metadata_;
  std::vector<Tensor> tensors_;
};

}  // namespace train
