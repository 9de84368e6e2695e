// Tests for train/safetensors: the byte layout against files built by hand from the format's specification,
// round trips, and that every kind of broken file gives a one-line error naming the file and the field
// (never a crash or a huge allocation), and that writes are atomic.
#include <sys/resource.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "common/temp_dir.h"
#include "train/safetensors.h"

namespace fs = std::filesystem;
using train::NamedArray;
using train::read_safetensors;
using train::SafetensorsFile;
using train::write_safetensors;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string u64_le(uint64_t v) {
  std::string s;
  for (int i = 0; i < 8; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

std::string f32_le(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  std::string s;
  for (int i = 0; i < 4; ++i) s += static_cast<char>((bits >> (8 * i)) & 0xff);
  return s;
}

// A file made by hand: size prefix, header text as given (no padding added), data bytes.
std::string raw_file(const std::string& header, const std::string& data) {
  return u64_le(header.size()) + header + data;
}

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// Reading `path` must throw one line that names the file and contains `needle` (the field or problem).
void expect_read_error(const std::string& path, const std::string& needle) {
  try {
    read_safetensors(path);
    BOOST_ERROR("no error reading " << path << ", expected one mentioning: " << needle);
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    BOOST_TEST_MESSAGE("error: " << msg);
    BOOST_TEST(msg.rfind(path + ": ", 0) == 0, "message does not start with the path: " << msg);
    BOOST_TEST(msg.find('\n') == std::string::npos, "message is not one line: " << msg);
    BOOST_TEST(msg.find(needle) != std::string::npos, "message lacks '" << needle << "': " << msg);
  }
}

template <typename F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    BOOST_ERROR("no error, expected one mentioning: " << needle);
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    BOOST_TEST_MESSAGE("error: " << msg);
    BOOST_TEST(msg.find('\n') == std::string::npos, "message is not one line: " << msg);
    BOOST_TEST(msg.find(needle) != std::string::npos, "message lacks '" << needle << "': " << msg);
  }
}

std::vector<NamedArray> sample_tensors() {
  // Names deliberately out of alphabetical order, a 0-d and an empty tensor, and floats whose bits matter.
  float nan_payload;
  uint32_t nan_bits = 0x7fc01234u;
  std::memcpy(&nan_payload, &nan_bits, 4);
  return {
      {"zeta.weight",
       {2, 3},
       {1.5f, -0.0f, 3.25e-40f, std::numeric_limits<float>::infinity(), nan_payload, 7.0f}},
      {"alpha.bias", {3}, {0.1f, 0.2f, 0.3f}},
      {"scalar", {}, {42.0f}},
      {"empty", {0, 4}, {}},
      {"mid.x", {1, 1, 2, 1}, {-1e30f, 1e-30f}},
  };
}

}  // namespace

BOOST_AUTO_TEST_CASE(round_trip_keeps_bits_metadata_and_order) {
  testing::TempDir tmp("attograd-safetensors");
  const std::string path = tmp.file("model.safetensors");
  const auto tensors = sample_tensors();
  const std::map<std::string, std::string> metadata = {
      {"config", R"({"name": "reverse", "model": {"d_model": 64}})"}, {"step", "1000"}, {"unicode", "πλ ✓"}};
  write_safetensors(path, tensors, metadata);

  const SafetensorsFile f = read_safetensors(path);
  BOOST_TEST(f.metadata == metadata);
  BOOST_REQUIRE_EQUAL(f.tensors.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    BOOST_TEST(f.tensors[i].name == tensors[i].name);
    BOOST_TEST(f.tensors[i].shape == tensors[i].shape);
    BOOST_REQUIRE_EQUAL(f.tensors[i].data.size(), tensors[i].data.size());
    for (size_t j = 0; j < tensors[i].data.size(); ++j)
      BOOST_TEST(bits_of(f.tensors[i].data[j]) == bits_of(tensors[i].data[j]),
                 tensors[i].name << "[" << j << "]");
  }
  BOOST_TEST(f.find("alpha.bias") == &f.tensors[1]);
  BOOST_TEST(f.find("nope") == nullptr);
}

BOOST_AUTO_TEST_CASE(empty_file_without_metadata_round_trips) {
  testing::TempDir tmp("attograd-safetensors");
  const std::string path = tmp.file("e.safetensors");
  write_safetensors(path, {}, {});
  // By the spec: an empty JSON object "{}" padded to 8 bytes with spaces, and no data.
  BOOST_TEST(slurp(path) == u64_le(8) + "{}      ");
  const SafetensorsFile f = read_safetensors(path);
  BOOST_TEST(f.tensors.empty());
  BOOST_TEST(f.metadata.empty());
}

BOOST_AUTO_TEST_CASE(header_is_padded_with_spaces_to_align_data_to_8) {
  testing::TempDir tmp("attograd-safetensors");
  const std::string path = tmp.file("a.safetensors");
  // Vary the header length through every residue mod 8.
  for (int len = 1; len <= 16; ++len) {
    std::vector<NamedArray> t = {{std::string(len, 'n'), {3}, {1, 2, 3}}};
    write_safetensors(path, t, {{"k", std::string(len % 5, 'v')}});
    const std::string bytes = slurp(path);
    BOOST_REQUIRE_GE(bytes.size(), 8u);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
    BOOST_TEST((8 + n) % 8 == 0u, "len " << len);
    BOOST_TEST(bytes.size() == 8 + n + 12, "len " << len);
    const std::string header = bytes.substr(8, n);
    const size_t close = header.find_last_of('}');
    BOOST_TEST(header.find_first_not_of(' ', close + 1) == std::string::npos, "padding is not spaces");
    BOOST_TEST(n - (close + 1) < 8u, "more padding than needed");
    BOOST_TEST(read_safetensors(path).tensors[0].data[2] == 3.0f);
  }
}

BOOST_AUTO_TEST_CASE(exact_bytes_of_hand_built_files) {
  testing::TempDir tmp("attograd-safetensors");
  const std::string path = tmp.file("tiny.safetensors");

  // One tensor "a" = [1, -2] and metadata k=v. The header is 79 characters, so one space pads it to 80
  // (0x50). 1.0f is 0x3F800000 and -2.0f is 0xC0000000, written little-endian.
  write_safetensors(path, {{"a", {2}, {1.0f, -2.0f}}}, {{"k", "v"}});
  const std::string expected1 =
      std::string("\x50\x00\x00\x00\x00\x00\x00\x00", 8) +
      R"({"__metadata__":{"k":"v"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} )" +
      std::string("\x00\x00\x80\x3f\x00\x00\x00\xc0", 8);
  BOOST_TEST(expected1.size() == 96u);
  BOOST_TEST(slurp(path) == expected1);

  // Two tensors kept in the given (non-alphabetical) order, no metadata: a 0-d "z" = 0.5 (0x3F000000) and an
  // empty [1, 0] "a" at offset 4. The header is 108 characters, padded with 4 spaces to 112 (0x70).
  write_safetensors(path, {{"z", {}, {0.5f}}, {"a", {1, 0}, {}}}, {});
  const std::string expected2 =
      std::string("\x70\x00\x00\x00\x00\x00\x00\x00", 8) +
      R"({"z":{"dtype":"F32","shape":[],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1,0],"data_offsets":[4,4]}}    )" +
      std::string("\x00\x00\x00\x3f", 4);
  BOOST_TEST(expected2.size() == 124u);
  BOOST_TEST(slurp(path) == expected2);

  // And a hand-built file in the other direction: keys in any order, whitespace in the JSON, no padding.
  spit(path, raw_file(R"({ "b" : {"data_offsets":[4,12], "shape":[2], "dtype":"F32"},
                          "a" : {"shape":[1], "dtype":"F32", "data_offsets":[0,4]}, "__metadata__": {"s": "7"} })",
                      f32_le(-1.0f) + f32_le(2.0f) + f32_le(3.0f)));
  const SafetensorsFile f = read_safetensors(path);
  BOOST_REQUIRE_EQUAL(f.tensors.size(), 2u);
  BOOST_TEST(f.tensors[0].name == "a");  // ordered by position in the data section
  BOOST_TEST(f.tensors[0].data == std::vector<float>({-1.0f}));
  BOOST_TEST(f.tensors[1].name == "b");
  BOOST_TEST(f.tensors[1].data == std::vector<float>({2.0f, 3.0f}));
  BOOST_TEST(f.metadata.at("s") == "7");
}

BOOST_AUTO_TEST_CASE(truncated_files_give_clear_errors) {
  testing::TempDir tmp("attograd-safetensors");
  const std::string good = tmp.file("good.safetensors");
  write_safetensors(good, sample_tensors(), {{"step", "3"}});
  const std::string bytes = slurp(good);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);

  const std::string path = tmp.file("cut.safetensors");
  struct Cut {
    size_t at;
    const char* needle;
  };
  const std::vector<Cut> cuts = {
      {0, "too short"},   {3, "too short"},           {7, "too short"},
      {8, "header size"}, {8 + n / 2, "header size"}, {8 + n - 1, "header size"},
      {8 + n, "data"},    {8 + n + 5, "data"},        {bytes.size() - 1, "data"},
  };
  for (const Cut& c : cuts) {
    BOOST_TEST_CONTEXT("cut at " << c.at << " of " << bytes.size()) {
      spit(path, bytes.substr(0, c.at));
      expect_read_error(path, c.needle);
    }
  }
  // Extra bytes after the last tensor are not silently ignored either.
  spit(path, bytes + "xxxx");
  expect_read_error(path, "data section");
}

BOOST_AUTO_TEST_CASE(corrupt_header_json) {
  testing::TempDir tmp("attograd-safetensors");
  const std::string path = tmp.file("bad.safetensors");
  spit(path, raw_file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4])", f32_le(1)));
  expect_read_error(path, "not valid JSON");
  spit(path, raw_file("\x01\x02\n\x03garbage", ""));
  expect_read_error(path, "not valid JSON");
  spit(path, raw_file("[1, 2]", ""));
  expect_read_error(path, "must be a JSON object");
  spit(path, raw_file(R"({"a": 5})", ""));
  expect_read_error(path, "(a)");
  spit(path, raw_file(R"({"a": {"dtype": "F32", "shape": [1]}})", f32_le(1)));
  expect_read_error(path, "missing field \"data_offsets\" (a)");
  spit(path,
       raw_file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "extra": 1}})", f32_le(1)));
  expect_read_error(path, "unexpected field \"extra\" (a)");
  spit(path, raw_file(R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", f32_le(1)));
  expect_read_error(path, "negative dimension (a: shape)");
  spit(path, raw_file(R"({"a": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", f32_le(1)));
  expect_read_error(path, "(a: shape)");
  spit(path, raw_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}})", f32_le(1)));
  expect_read_error(path, "(a: data_offsets)");
  spit(path, raw_file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})", f32_le(1)));
  expect_read_error(path, "after end");
  spit(path, raw_file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", f32_le(1)));
  expect_read_error(path, "(a: data_offsets)");
  spit(path, raw_file(R"({"__metadata__": {"step": 3}})", ""));
  expect_read_error(path, "(__metadata__.step)");
  spit(path, raw_file(R"({"__metadata__": "x"})", ""));
  expect_read_error(path, "(__metadata__)");
  // A shape whose element count overflows 64 bits.
  spit(path,
       raw_file(R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296, 4], "data_offsets": [0, 4]}})",
                f32_le(1)));
  expect_read_error(path, "(a: shape)");
  // A control character in a tensor name must not break the one-line message.
  spit(path,
       raw_file("{\"bad\\nname\": {\"dtype\": \"F16\", \"shape\": [1], \"data_offsets\": [0, 2]}}", "ab"));
  expect_read_error(path, "F16");
}

BOOST_AUTO_TEST_CASE(offsets_beyond_the_file) {
  testing::TempDir tmp("attograd-safetensors");
  const std::string path = tmp.file("beyond.safetensors");
  spit(path, raw_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", f32_le(1)));
  expect_read_error(path, "beyond the data section's 4 bytes (a: data_offsets)");
  spit(
      path,
      raw_file(
          R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [18446744073709551612, 18446744073709551615]}})",
          f32_le(1)));
  expect_read_error(path, "(a: data_offsets)");
}

BOOST_AUTO_TEST_CASE(overlapping_and_gapped_offsets) {
  testing::TempDir tmp("attograd-safetensors");
  const std::string path = tmp.file("overlap.safetensors");
  const std::string data = f32_le(1) + f32_le(2) + f32_le(3);
  spit(path, raw_file(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                          "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                      data));
  expect_read_error(path, "overlap those of \"a\" (b: data_offsets)");
  // An empty tensor placed inside another one also overlaps it.
  spit(path, raw_file(R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]},
                          "e": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]}})",
                      data));
  expect_read_error(path, "(e: data_offsets)");
  spit(path, raw_file(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                          "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                      data));
  expect_read_error(path, "unused (b: data_offsets)");
}

BOOST_AUTO_TEST_CASE(unsupported_dtype_is_named) {
  testing::TempDir tmp("attograd-safetensors");
  const std::string path = tmp.file("dtype.safetensors");
  spit(path,
       raw_file(R"({"w": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]}})", std::string(8, '\0')));
  expect_read_error(path, "dtype F64 is not supported, only F32 (w: dtype)");
  spit(path, raw_file(R"({"w": {"dtype": 3, "shape": [1], "data_offsets": [0, 4]}})", f32_le(0)));
  expect_read_error(path, "(w: dtype)");
}

BOOST_AUTO_TEST_CASE(huge_declared_header_size_is_rejected_before_allocating) {
  testing::TempDir tmp("attograd-safetensors");
  const std::string path = tmp.file("huge.safetensors");
  spit(path, u64_le(std::numeric_limits<uint64_t>::max()) + "{}");
  expect_read_error(path, "header size 18446744073709551615 is beyond the file");
  // A file big enough to hold the header must still respect the 8 MB limit. Sparse, so it costs no disk.
  spit(path, u64_le(200'000'000) + "{}");
  fs::resize_file(path, 300'000'000);
  expect_read_error(path, "over the limit");
}

BOOST_AUTO_TEST_CASE(missing_file_and_directory) {
  testing::TempDir tmp("attograd-safetensors");
  expect_read_error(tmp.file("nope.safetensors"), "no such file");
  expect_read_error(tmp.dir.string(), "is a directory");
}

BOOST_AUTO_TEST_CASE(expect_tensors_reports_missing_unexpected_and_mismatched) {
  testing::TempDir tmp("attograd-safetensors");
  const std::string path = tmp.file("m.safetensors");
  write_safetensors(path, {{"w", {2, 3}, std::vector<float>(6, 1.0f)}, {"b", {2}, {0, 0}}}, {});
  const SafetensorsFile f = read_safetensors(path);
  train::expect_tensors(f, {{"b", {2}}, {"w", {2, 3}}}, path);  // any order is fine
  expect_error(
      [&] {
        train::expect_tensors(f, {{"w", {2, 3}}, {"b", {2}}, {"c", {1}}}, path);
      },
      path + ": missing tensor, expected shape [1] (c)");
  expect_error(
      [&] {
        train::expect_tensors(f, {{"w", {2, 3}}}, path);
      },
      path + ": unexpected tensor of shape [2] (b)");
  expect_error(
      [&] {
        train::expect_tensors(f, {{"w", {3, 2}}, {"b", {2}}}, path);
      },
      path + ": shape mismatch: expected [3, 2], found [2, 3] (w)");
}

BOOST_AUTO_TEST_CASE(writer_rejects_inconsistent_tensors_without_touching_the_file) {
  testing::TempDir tmp("attograd-safetensors");
  const std::string path = tmp.file("w.safetensors");
  expect_error([&] { write_safetensors(path, {{"a", {2, 2}, {1, 2, 3}}}, {}); }, "(a: data)");
  expect_error([&] { write_safetensors(path, {{"a", {1}, {1}}, {"a", {1}, {2}}}, {}); }, "appears twice (a)");
  expect_error([&] { write_safetensors(path, {{"__metadata__", {1}, {1}}}, {}); }, "reserved");
  expect_error([&] { write_safetensors(path, {{"a", {-1}, {}}}, {}); }, "(a: shape)");
  BOOST_TEST(!fs::exists(path));
  BOOST_TEST(!fs::exists(path + ".tmp"));
}

BOOST_AUTO_TEST_CASE(atomic_write_success_leaves_no_temp_and_replaces_old) {
  testing::TempDir tmp("attograd-safetensors");
  const std::string path = tmp.file("model.safetensors");
  write_safetensors(path, {{"a", {1}, {1.0f}}}, {{"step", "1"}});
  write_safetensors(path, {{"a", {2}, {2.0f, 3.0f}}}, {{"step", "2"}});
  const SafetensorsFile f = read_safetensors(path);
  BOOST_TEST(f.metadata.at("step") == "2");
  BOOST_TEST(f.tensors.at(0).data == std::vector<float>({2.0f, 3.0f}));
  // Only the target itself is left in the directory.
  BOOST_TEST(std::distance(fs::directory_iterator(tmp.dir), fs::directory_iterator()) == 1);
}

BOOST_AUTO_TEST_CASE(failed_writes_leave_the_old_file_and_no_temp) {
  testing::TempDir tmp("attograd-safetensors");
  const std::string path = tmp.file("model.safetensors");
  write_safetensors(path, {{"a", {1}, {1.0f}}}, {{"step", "1"}});
  const std::string old_bytes = slurp(path);
  const std::vector<NamedArray> next = {{"a", {64}, std::vector<float>(64, 9.0f)}};
  auto only_the_target_is_left = [&] {
    BOOST_TEST(std::distance(fs::directory_iterator(tmp.dir), fs::directory_iterator()) == 1);
  };

  // The disk fills up mid-write: a 100-byte file-size limit (SIGXFSZ ignored) makes write() fail with EFBIG.
  {
    const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit old_limit{};
    getrlimit(RLIMIT_FSIZE, &old_limit);
    rlimit small = old_limit;
    small.rlim_cur = 100;
    setrlimit(RLIMIT_FSIZE, &small);
    expect_error([&] { write_safetensors(path, next, {{"step", "2"}}); }, path + ": cannot write");
    setrlimit(RLIMIT_FSIZE, &old_limit);
    std::signal(SIGXFSZ, old_handler);
  }
  BOOST_TEST(slurp(path) == old_bytes);
  only_the_target_is_left();

  // The target is a directory: refused before a temp file is made (bad input, not a failed write), and
  // the directory survives.
  const std::string dir_target = tmp.file("adir");
  fs::create_directory(dir_target);
  spit(dir_target + "/inside", "keep");
  expect_error([&] { write_safetensors(dir_target, next, {}); },
               dir_target + ": is a folder, not a regular file");
  BOOST_TEST(slurp(dir_target + "/inside") == "keep");
  fs::remove_all(dir_target);
  only_the_target_is_left();

  // A parent "directory" that is a file.
  expect_error([&] { write_safetensors(path + "/m.safetensors", next, {}); }, "cannot write");

  // The directory is read-only (root ignores permission bits, so this case only runs as a normal user).
  const std::string ro_dir = tmp.file("ro");
  fs::create_directory(ro_dir);
  const std::string ro_path = ro_dir + "/model.safetensors";
  write_safetensors(ro_path, {{"a", {1}, {1.0f}}}, {});
  const std::string ro_old = slurp(ro_path);
  fs::permissions(ro_dir, fs::perms::owner_read | fs::perms::owner_exec);
  if (::geteuid() != 0) {
    expect_error([&] { write_safetensors(ro_path, next, {}); }, ro_path + ": cannot write");
    BOOST_TEST(slurp(ro_path) == ro_old);
  } else {
    BOOST_TEST_MESSAGE("running as root: skipping the read-only directory case");
  }
  fs::permissions(ro_dir, fs::perms::owner_all);
}

BOOST_AUTO_TEST_CASE(state_words_round_trip_through_metadata) {
  testing::TempDir tmp("attograd-safetensors");
  const std::string path = tmp.file("state.safetensors");
  const uint64_t big = std::numeric_limits<uint64_t>::max();
  const double cached = -0.123456789012345678;
  write_safetensors(path, {{"adam.m.w", {2}, {0.25f, -0.5f}}},
                    {{"step", train::u64_to_metadata(12345)},
                     {"rng.s0", train::u64_to_metadata(big)},
                     {"rng.cached_normal", train::f64_bits_to_metadata(cached)},
                     {"bad", "12x"},
                     {"negative", "-1"},
                     {"empty", ""}});
  const SafetensorsFile f = read_safetensors(path);
  BOOST_TEST(f.metadata.at("rng.s0") == "18446744073709551615");  // decimal, as the format's strings
  BOOST_TEST(train::metadata_u64(f, "step", path) == 12345u);
  BOOST_TEST(train::metadata_u64(f, "rng.s0", path) == big);
  const double back = train::metadata_f64_bits(f, "rng.cached_normal", path);
  BOOST_TEST(std::memcmp(&back, &cached, sizeof back) == 0);
  BOOST_TEST(train::metadata_string(f, "step", path) == "12345");
  expect_error([&] { train::metadata_u64(f, "bad", path); }, "(__metadata__.bad)");
  expect_error([&] { train::metadata_u64(f, "negative", path); }, "(__metadata__.negative)");
  expect_error([&] { train::metadata_u64(f, "empty", path); }, "(__metadata__.empty)");
  expect_error([&] { train::metadata_u64(f, "absent", path); },
               path + ": missing metadata key (__metadata__.absent)");
}

// ---- The mapped reader of other programs' files: F32, F16, BF16 and F64 converted to float32, other dtypes
// (a model's buffers) listed but not read.

namespace {

std::string u16_le(uint16_t v) {
  return std::string{static_cast<char>(v & 0xff), static_cast<char>(v >> 8)};
}

std::vector<float> mapped_values(const std::string& path, const std::string& name) {
  const train::MappedSafetensors file(path);
  const train::MappedSafetensors::Tensor* t = file.find(name);
  BOOST_TEST_REQUIRE(t != nullptr);
  int64_t n = 1;
  for (int64_t d : t->shape) n *= d;
  std::vector<float> values(static_cast<size_t>(n));
  file.read(*t, values.data());
  file.release(*t);
  return values;
}

}  // namespace

BOOST_AUTO_TEST_CASE(mapped_reader_reads_what_the_writer_wrote) {
  testing::TempDir tmp("attograd-safetensors");
  const std::string path = tmp.file("m.safetensors");
  write_safetensors(path, sample_tensors(), {{"step", "3"}});
  const train::MappedSafetensors file(path);
  BOOST_TEST(file.metadata().at("step") == "3");
  BOOST_TEST(file.tensors().size() == sample_tensors().size());
  for (const NamedArray& want : sample_tensors()) {
    const std::vector<float> got = mapped_values(path, want.name);
    BOOST_TEST_REQUIRE(got.size() == want.data.size());
    for (size_t i = 0; i < got.size(); ++i) BOOST_TEST(bits_of(got[i]) == bits_of(want.data[i]), want.name);
  }
}

BOOST_AUTO_TEST_CASE(mapped_reader_converts_f16_and_bf16) {
  testing::TempDir tmp("attograd-safetensors");
  const std::string path = tmp.file("half.safetensors");
  // F16: 1.0 (0x3c00), -2.5 (0xc100), the smallest subnormal 2^-24 (0x0001), 65504 (0x7bff), inf (0x7c00).
  // BF16: the upper halves of 1.0f (0x3f80), -3.0f (0xc040) and 1e-30f's bits.
  const uint16_t tiny_bf16 = static_cast<uint16_t>(bits_of(1e-30f) >> 16);
  const std::string data = u16_le(0x3c00) + u16_le(0xc100) + u16_le(0x0001) + u16_le(0x7bff) +
                           u16_le(0x7c00) + u16_le(0x3f80) + u16_le(0xc040) + u16_le(tiny_bf16);
  spit(path, raw_file(R"({"h": {"dtype": "F16", "shape": [5], "data_offsets": [0, 10]},
                         "b": {"dtype": "BF16", "shape": [3], "data_offsets": [10, 16]}})",
                      data));
  const std::vector<float> h = mapped_values(path, "h");
  BOOST_TEST(h[0] == 1.0f);
  BOOST_TEST(h[1] == -2.5f);
  BOOST_TEST(h[2] == std::ldexp(1.0f, -24));
  BOOST_TEST(h[3] == 65504.0f);
  BOOST_TEST(std::isinf(h[4]));
  const std::vector<float> b = mapped_values(path, "b");
  BOOST_TEST(b[0] == 1.0f);
  BOOST_TEST(b[1] == -3.0f);
  BOOST_TEST(bits_of(b[2]) == (bits_of(1e-30f) & 0xffff0000u));
  // attograd's own reader still takes F32 only.
  expect_read_error(path, "only F32");
}

// F64 is rounded to float32. A buffer of another dtype (transformers' BOOL causal masks in GPT-Neo's and
// Pythia's checkpoints, I64 position ids) is listed with its dtype, shape and bytes checked, so that an
// importer can skip it; reading it is a one-line error naming the tensor.
BOOST_AUTO_TEST_CASE(mapped_reader_lists_every_dtype_and_reads_the_floats) {
  testing::TempDir tmp("attograd-safetensors");
  const std::string path = tmp.file("buffers.safetensors");
  const double d[2] = {0.1, -1e300};
  std::string f64(sizeof d, '\0');
  std::memcpy(&f64[0], d, sizeof d);
  spit(path, raw_file(R"({"mask": {"dtype": "BOOL", "shape": [1, 1, 2, 2], "data_offsets": [0, 4]},
                         "ids": {"dtype": "I64", "shape": [1], "data_offsets": [4, 12]},
                         "d": {"dtype": "F64", "shape": [2], "data_offsets": [16, 32]},
                         "pad": {"dtype": "U8", "shape": [4], "data_offsets": [12, 16]}})",
                      std::string("\1\0\1\1", 4) + std::string(12, '\0') + f64));
  const train::MappedSafetensors file(path);
  BOOST_TEST(file.tensors().size() == 4u);
  const std::vector<float> got = mapped_values(path, "d");
  BOOST_TEST(got[0] == 0.1f);  // the float nearest 0.1
  BOOST_TEST(std::isinf(got[1]));
  BOOST_TEST(got[1] < 0);
  for (const char* name : {"mask", "ids", "pad"}) {
    const train::MappedSafetensors::Tensor* t = file.find(name);
    BOOST_TEST_REQUIRE(t != nullptr);
    BOOST_TEST(!train::dtype_is_float(t->dtype));
    std::vector<float> out(8);
    expect_error([&] { file.read(*t, out.data()); },
                 path + ": dtype " + train::dtype_name(t->dtype) +
                     " cannot be read as weights (F32, F16, BF16 or F64) (" + name + ": dtype)");
  }
  BOOST_TEST(std::string(train::dtype_name(file.find("mask")->dtype)) == "BOOL");
  BOOST_TEST(train::dtype_bytes(file.find("ids")->dtype) == 8u);
  // attograd's own reader takes F32 only.
  expect_read_error(path, "is not supported, only F32");
}

BOOST_AUTO_TEST_CASE(mapped_reader_checks_the_header_like_the_reader) {
  testing::TempDir tmp("attograd-safetensors");
  const std::string path = tmp.file("bad.safetensors");
  struct Case {
    std::string bytes, needle;
  };
  const std::vector<Case> cases = {
      {"abc", "too short"},
      {u64_le(1000) + "{}", "header size"},
      {raw_file(R"({"a": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 4]}})", "abcd"), "BF16 values"},
      {raw_file(R"({"a": {"dtype": "F16", "shape": [2], "data_offsets": [0, 8]}})", "abcd"), "beyond"},
      {raw_file(R"({"a": {"dtype": "F4", "shape": [2], "data_offsets": [0, 1]}})", std::string(1, '\0')),
       "dtype F4 is not a safetensors dtype (F32, F16, BF16, F64, BOOL"},
      {raw_file(R"({"a": {"dtype": "I64", "shape": [2], "data_offsets": [0, 8]}})", std::string(8, '\0')),
       "I64 values of 8 bytes"},
      {raw_file(R"({"a": {"dtype": "F16", "shape": [1], "data_offsets": [0, 2]}})", "abcd"), "data section"},
  };
  for (const Case& c : cases) {
    spit(path, c.bytes);
    BOOST_TEST_CONTEXT(c.needle) {
      expect_error([&] { train::MappedSafetensors file(path); }, c.needle);
      expect_error([&] { train::MappedSafetensors file(path); }, path);
    }
  }
  expect_error([&] { train::MappedSafetensors file(tmp.file("absent.safetensors")); }, "no such file");
}
