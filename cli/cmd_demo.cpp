// attograd demo [--section N] [--json]: prints the seed lesson's walkthrough (analysis/lesson.h).
#include "analysis/lesson.h"
#include "cli/commands.h"
#include "cli/print.h"
#include "cli/table_options.h"
#include "study/fields.h"

namespace cli {

Command add_demo(CLI::App& app) {
  struct Args {
    analysis::LessonRequest request;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* sub = app.add_subcommand("demo", "the seed lesson's walkthrough: self-attention from scratch");
  add_table_options(sub, study::lesson_fields(), a->request,
                    {{"section", {"", "", io::at_least(1).up_to(analysis::kLessonSections)}}});
  sub->add_flag("--json", a->json, "print one JSON object (section, text)");
  return [a] {
    const auto out = analysis::lesson(a->request);
    return print_output(a->json, out, findings::lesson_to_json(out.result), "", out.result.text);
  };
}

}  // namespace cli
