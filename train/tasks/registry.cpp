// The task registry: the one list of task kinds, in the order the docs list them. Every other place reads
// it (task_kinds, find_task_problem, make_task, the tests that cover every task), so no other code lists
// the kinds. The list is built by explicit calls, not by static registration objects in each task's
// file, which the linker would drop from the static library.
//
// How to add a task (say "parity"):
//   1. Write train/tasks/parity.cpp: a Task subclass (train/task.h) in an anonymous namespace, with
//      draw_sequence, ideal_keys and describe, and the entry function that names it:
//        TaskKind parity_task() {
//          TaskKind kind;
//          kind.name = "parity";
//          kind.format = "BOS a1..an SEP p, p = (a1 + .. + an) mod 2; T = n+2; scored: p";
//          kind.min_length = 1;
//          kind.check = nullptr;  // or its own rule: the first TaskProblem, else nothing
//          kind.log10_distinct_sequences = [](const TaskConfig& c) {
//            return c.length * std::log10(c.vocab);
//          };
//          kind.make = [](const TaskConfig& c) -> std::unique_ptr<Task> {
//            return std::make_unique<ParityTask>(c);
//          };
//          return kind;
//        }
//      The shared ranges of vocab and length and the held-out split's minimum of distinct sequences apply
//      without a word; copy, reverse, sort and counting share train/tasks/prompt_answer.h's layout.
//   2. Register it below: declare `TaskKind parity_task();` with the others and call it in the list, at
//      the place the docs list it.
//   3. Add its row to docs/configs.md's task table (tests/train/test_tasks.cpp checks every kind has one,
//      in this order), its name to that file's `task.kind` field, and its own format test to
//      tests/train/test_tasks.cpp; the tests of every task (batch shapes, ideal keys, determinism, token
//      names, minimum length) pick it up from the registry.
#include "train/tasks.h"

namespace train {
namespace tasks {

TaskKind copy_task();         // train/tasks/copy.cpp
TaskKind reverse_task();      // train/tasks/reverse.cpp
TaskKind sort_task();         // train/tasks/sort.cpp
TaskKind induction_task();    // train/tasks/induction.cpp
TaskKind modadd_task();       // train/tasks/modadd.cpp
TaskKind modadd_bare_task();  // train/tasks/modadd.cpp
TaskKind counting_task();     // train/tasks/counting.cpp
TaskKind random_task();       // train/tasks/random.cpp
TaskKind sequences_task();    // train/tasks/sequences.cpp
TaskKind text_task();         // train/tasks/text.cpp
TaskKind pretrained_task();   // train/tasks/pretrained.cpp

}  // namespace tasks

const std::vector<TaskKind>& task_registry() {
  // One task a line.
  // clang-format off
  static const std::vector<TaskKind> kinds{
      tasks::copy_task(),
      tasks::reverse_task(),
      tasks::sort_task(),
      tasks::induction_task(),
      tasks::modadd_task(),
      tasks::modadd_bare_task(),
      tasks::counting_task(),
      tasks::random_task(),
      tasks::sequences_task(),
      tasks::text_task(),
      tasks::pretrained_task(),
  };
  // clang-format on
  return kinds;
}

}  // namespace train
