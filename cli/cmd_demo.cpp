// attograd demo [--section N] [--json]: prints the seed lesson's walkthrough (study/lesson.h).
#include "cli/commands.h"
#include "cli/print.h"
#include "study/lesson.h"

namespace cli {

Command add_demo(CLI::App& app) {
  struct Args {
    study::LessonRequest request;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("demo", "the seed lesson's walkthrough: self-attention from scratch");
  add_number(sub, "--section", a->request.section, "run only this section (1-7)",
             io::at_least(1).up_to(study::kLessonSections));
  sub->add_flag("--json", a->json, "print one JSON object (section, text)");
  return [a] {
    const auto out = study::lesson(a->request);
    return print_output(a->json, out, findings::lesson_to_json(out.result), "", out.result.text);
  };
}

}  // namespace cli
