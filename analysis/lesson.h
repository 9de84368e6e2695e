// attograd demo as a library call: the seed lesson ("self-attention from scratch") step by step, as text
// whose every number the engine computes. Not a trained model: the lesson's own tiny attention.
#pragma once

#include "analysis/tool.h"
#include "findings/lesson_view.h"

namespace analysis {

constexpr int kLessonSections = 7;

struct LessonRequest {
  int section = 0;  // 1..kLessonSections, or 0 for the whole lesson
};

Output<findings::LessonText> lesson(const LessonRequest& request);

}  // namespace analysis
