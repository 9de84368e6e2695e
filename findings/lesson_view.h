// The seed lesson's walkthrough (analysis/lesson.h) as plain data: which section (0 = all) and its text;
// JSON {"section": N, "text": "..."} (`attograd demo --json`, attograd.demo()).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace findings {

struct LessonText {
  int section = 0;
  std::string text;
};

inline nlohmann::json lesson_to_json(const LessonText& l) {
  return {{"section", l.section}, {"text", l.text}};
}

}  // namespace findings
