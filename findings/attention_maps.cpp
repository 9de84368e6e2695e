// JSON conversion and validation for attention dumps (see attention_maps.h).
#include "findings/attention_maps.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <stdexcept>
#include <utility>

#include "io/atomic_file.h"
#include "io/json_error.h"
#include "io/run_layout.h"

namespace findings {

void check_square(const AttentionWeights& w, const char* what) {
  for (const auto& row : w)
    if (row.size() != w.size())
      throw std::invalid_argument(std::string(what) + ": expected a T x T map, got a row of " +
                                  std::to_string(row.size()) + " in a map of " + std::to_string(w.size()) +
                                  " rows");
}

namespace {

using nlohmann::json;

using io::json_array;
using io::json_error;
using io::json_member;
using io::json_nonnegative_integer;

std::string type_of(const json& j) {
  return j.type_name();
}

AttentionWeights read_weights(const json& j, size_t T, const std::string& source, const std::string& ptr) {
  json_array(j, source, ptr);
  if (j.size() != T)
    json_error(source, ptr,
               "expected " + std::to_string(T) + " rows (one per token), got " + std::to_string(j.size()));
  AttentionWeights w(T, std::vector<float>(T));
  for (size_t i = 0; i < T; ++i) {
    const std::string row_ptr = ptr + "/" + std::to_string(i);
    const json& row = json_array(j[i], source, row_ptr);
    if (row.size() != T)
      json_error(source, row_ptr,
                 "expected " + std::to_string(T) + " weights, got " + std::to_string(row.size()));
    for (size_t k = 0; k < T; ++k) {
      const json& x = row[k];
      if (!x.is_number())
        json_error(source, row_ptr + "/" + std::to_string(k), "expected a number, got " + type_of(x));
      const double v = x.get<double>();
      // Slack for weights written with rounding; anything further out is not a softmax output.
      if (!std::isfinite(v) || v < -1e-3 || v > 1.0 + 1e-3)
        json_error(source, row_ptr + "/" + std::to_string(k), "expected a weight in [0, 1], got " + x.dump());
      w[i][k] = static_cast<float>(v);
    }
  }
  return w;
}

}  // namespace

nlohmann::json weights_to_json(const AttentionWeights& w, double scale) {
  json rows = json::array();
  for (const auto& row : w) {
    json r = json::array();
    for (float v : row) r.push_back(std::round(static_cast<double>(v) * scale) / scale);
    rows.push_back(std::move(r));
  }
  return rows;
}

nlohmann::json attention_dump_to_json(const AttentionDump& dump) {
  json probes = json::array();
  for (const Probe& p : dump.probes) {
    json maps = json::array();
    for (const HeadMap& m : p.maps) {
      maps.push_back({{"layer", m.layer}, {"head", m.head}, {"weights", weights_to_json(m.weights, 1e6)}});
    }
    probes.push_back({{"ids", p.ids}, {"tokens", p.tokens}, {"maps", std::move(maps)}});
  }
  return {{"step", dump.step}, {"probes", std::move(probes)}};
}

AttentionDump attention_dump_from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) json_error(source, "", "expected an object {\"step\", \"probes\"}, got " + type_of(j));
  AttentionDump dump;
  dump.step = json_nonnegative_integer(json_member(j, "step", source, ""), source, "/step");
  const json& probes = json_array(json_member(j, "probes", source, ""), source, "/probes");
  dump.probes.reserve(probes.size());
  for (size_t p = 0; p < probes.size(); ++p) {
    const std::string pp = "/probes/" + std::to_string(p);
    const json& pj = probes[p];
    if (!pj.is_object())
      json_error(source, pp, "expected an object {\"ids\", \"tokens\", \"maps\"}, got " + type_of(pj));
    Probe probe;
    const json& ids = json_array(json_member(pj, "ids", source, pp), source, pp + "/ids");
    for (size_t t = 0; t < ids.size(); ++t) {
      const std::string ip = pp + "/ids/" + std::to_string(t);
      const int64_t id = json_nonnegative_integer(ids[t], source, ip);
      if (id > 2147483647)
        json_error(source, ip, "expected a token id below 2^31, got " + std::to_string(id));
      probe.ids.push_back(static_cast<int>(id));
    }
    if (probe.ids.empty()) json_error(source, pp + "/ids", "expected at least one token id");
    const json& tokens = json_array(json_member(pj, "tokens", source, pp), source, pp + "/tokens");
    if (tokens.size() != probe.ids.size())
      json_error(source, pp + "/tokens",
                 "expected " + std::to_string(probe.ids.size()) + " tokens (one per id), got " +
                     std::to_string(tokens.size()));
    for (size_t t = 0; t < tokens.size(); ++t) {
      if (!tokens[t].is_string())
        json_error(source, pp + "/tokens/" + std::to_string(t),
                   "expected a string, got " + type_of(tokens[t]));
      probe.tokens.push_back(tokens[t].get<std::string>());
    }
    const json& maps = json_array(json_member(pj, "maps", source, pp), source, pp + "/maps");
    std::set<std::pair<int64_t, int64_t>> seen;
    for (size_t m = 0; m < maps.size(); ++m) {
      const std::string mp = pp + "/maps/" + std::to_string(m);
      const json& mj = maps[m];
      if (!mj.is_object())
        json_error(source, mp, "expected an object {\"layer\", \"head\", \"weights\"}, got " + type_of(mj));
      HeadMap map;
      const int64_t layer =
          json_nonnegative_integer(json_member(mj, "layer", source, mp), source, mp + "/layer");
      const int64_t head =
          json_nonnegative_integer(json_member(mj, "head", source, mp), source, mp + "/head");
      if (layer > 100000 || head > 100000) json_error(source, mp, "expected layer and head below 100000");
      if (!seen.insert({layer, head}).second)
        json_error(source, mp,
                   "expected each (layer, head) once per probe, got layer " + std::to_string(layer) +
                       " head " + std::to_string(head) + " again");
      map.layer = static_cast<int>(layer);
      map.head = static_cast<int>(head);
      map.weights =
          read_weights(json_member(mj, "weights", source, mp), probe.ids.size(), source, mp + "/weights");
      probe.maps.push_back(std::move(map));
    }
    dump.probes.push_back(std::move(probe));
  }
  return dump;
}

namespace {

constexpr const char* kBase64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace

std::string lower_triangle_base64(const AttentionWeights& w) {
  check_square(w, "lower_triangle_base64");
  std::string bytes;
  bytes.reserve(w.size() * (w.size() + 1) / 2);
  for (size_t i = 0; i < w.size(); ++i)
    for (size_t j = 0; j <= i; ++j)
      bytes += static_cast<char>(std::lround(std::clamp(double(w[i][j]), 0.0, 1.0) * 255));
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const auto byte = [&](size_t k) { return k < bytes.size() ? static_cast<unsigned char>(bytes[k]) : 0u; };
    const unsigned n = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    out += kBase64[(n >> 18) & 63];
    out += kBase64[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kBase64[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kBase64[n & 63] : '=';
  }
  return out;
}

AttentionWeights lower_triangle_from_base64(const std::string& text, size_t T) {
  const size_t n = T * (T + 1) / 2;
  if (text.size() != (n + 2) / 3 * 4)
    throw std::invalid_argument("lower_triangle_from_base64: expected " + std::to_string((n + 2) / 3 * 4) +
                                " characters for T = " + std::to_string(T) + ", got " +
                                std::to_string(text.size()));
  std::string bytes;
  unsigned acc = 0;
  int bits = 0;
  for (char c : text) {
    if (c == '=') break;
    const char* at = std::strchr(kBase64, c);
    if (c == '\0' || !at)
      throw std::invalid_argument(std::string("lower_triangle_from_base64: not a base64 character: '") + c +
                                  "'");
    acc = (acc << 6) | unsigned(at - kBase64), bits += 6;
    if (bits >= 8) bits -= 8, bytes += static_cast<char>((acc >> bits) & 255);
  }
  if (bytes.size() != n)
    throw std::invalid_argument("lower_triangle_from_base64: expected " + std::to_string(n) + " bytes, got " +
                                std::to_string(bytes.size()));
  AttentionWeights w(T, std::vector<float>(T, 0.0f));
  size_t k = 0;
  for (size_t i = 0; i < T; ++i)
    for (size_t j = 0; j <= i; ++j) w[i][j] = static_cast<unsigned char>(bytes[k++]) / 255.0f;
  return w;
}

std::string head_name(int layer, int head) {
  return "L" + std::to_string(layer) + " H" + std::to_string(head);
}

AttentionDump read_attention_dump(const std::string& path) {
  return attention_dump_from_json(io::read_json_file(path), path);
}

void write_attention_dump(const std::string& path, const AttentionDump& dump) {
  io::write_text_file_atomically(
      path, attention_dump_to_json(dump).dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
}

std::vector<AttentionDump> read_attention_dumps(const std::string& dir) {
  namespace fs = std::filesystem;
  std::vector<AttentionDump> dumps;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return dumps;
  std::vector<std::string> paths;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (io::layout::is_step_json(entry.path().filename().string())) paths.push_back(entry.path().string());
  }
  for (const std::string& p : paths) dumps.push_back(read_attention_dump(p));
  std::sort(dumps.begin(), dumps.end(),
            [](const AttentionDump& a, const AttentionDump& b) { return a.step < b.step; });
  return dumps;
}

std::vector<std::vector<const HeadMap*>> maps_by_layer(const Probe& probe) {
  std::map<int, std::vector<const HeadMap*>> by_layer;
  for (const HeadMap& m : probe.maps) by_layer[m.layer].push_back(&m);
  std::vector<std::vector<const HeadMap*>> out;
  out.reserve(by_layer.size());
  for (auto& [layer, maps] : by_layer) {
    std::sort(maps.begin(), maps.end(), [](const HeadMap* a, const HeadMap* b) { return a->head < b->head; });
    out.push_back(std::move(maps));
  }
  return out;
}

}  // namespace findings
