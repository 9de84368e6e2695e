// Every row of study/tools.h bound once under its python_name: Run.NAME(*args, **kwargs) for a tool that
// reads a run, attograd.NAME(*args, **kwargs) for one that stands alone. Arguments become the request's JSON
// by field name (positional ones in the row's field order; numpy arrays and scalars as lists and numbers);
// the call runs without the GIL; the result's JSON comes back as dicts and lists, as `attograd NAME --json`
// prints it.
#include "study/tools.h"

#include <algorithm>
#include <string>

#include "python/convert.h"
#include "python/run.h"

namespace pyag {

namespace {

// The request of `tool` from a call's arguments; TypeError for an argument the request has no field for or
// one given twice, as Python's own calls say it.
nlohmann::json request_from_args(const study::Tool& tool, const py::args& args, const py::kwargs& kwargs) {
  if (args.size() > tool.fields.size())
    throw py::type_error(tool.python_name + "() takes at most " + std::to_string(tool.fields.size()) +
                         " positional arguments (" + std::to_string(args.size()) + " given)");
  nlohmann::json request = nlohmann::json::object();
  // A function is no request value; said so here, since a name can also hold another overload taking one
  // (the engine's gradcheck(f, inputs)) whose arguments did not match.
  auto to_json = [&tool](const std::string& field, py::handle v) {
    if (PyCallable_Check(v.ptr()))
      throw py::type_error(tool.python_name + "() argument '" + field +
                           "': expected a request value, not a function");
    return python_to_json(v, field);
  };
  for (size_t i = 0; i < args.size(); ++i) request[tool.fields[i]] = to_json(tool.fields[i], args[i]);
  for (const auto& [key, value] : kwargs) {
    const std::string name = py::str(key).cast<std::string>();
    // prompt=TEXT: the first input sequence as text for the run's tokenizer (generate has its own prompt).
    if (name == "prompt" && !tool.prompt_field.empty() &&
        std::find(tool.fields.begin(), tool.fields.end(), name) == tool.fields.end()) {
      if (request.contains(tool.prompt_field))
        throw py::type_error(tool.python_name + "() got both prompt and " + tool.prompt_field);
      if (!py::isinstance<py::str>(value))
        throw py::type_error(tool.python_name + "() argument 'prompt': expected text (str), got " +
                             type_name(value));
      request[tool.prompt_field] = {{"prompt", value.cast<std::string>()}};
      continue;
    }
    if (std::find(tool.fields.begin(), tool.fields.end(), name) == tool.fields.end())
      throw py::type_error(tool.python_name + "() got an unexpected keyword argument '" + name + "'");
    if (request.contains(name))
      throw py::type_error(tool.python_name + "() got multiple values for argument '" + name + "'");
    if (!value.is_none()) request[name] = to_json(name, value);
  }
  return request;
}

std::string signature(const study::Tool& tool) {
  std::string text = tool.python_name + "(";
  for (size_t i = 0; i < tool.fields.size(); ++i) text += (i ? ", " : "") + tool.fields[i];
  return text + ") -> dict: " + tool.summary + ", as `attograd " + tool.name + " --json` prints it.";
}

}  // namespace

void bind_tools(py::module_& m, py::class_<Run>& run_class) {
  m.def(
      "tools",
      [] {
        py::list out;
        for (const study::Tool& t : study::tools())
          out.append(py::dict(py::arg("name") = t.name, py::arg("python_name") = t.python_name,
                              py::arg("summary") = t.summary, py::arg("fields") = t.fields,
                              py::arg("reads_run") = t.reads_run));
        return out;
      },
      "Every study tool: its name (the command's), python_name (its method's), summary, request fields and "
      "whether it is a method of Run.");
  for (const study::Tool& t : study::tools()) {
    const study::Tool* tool = &t;  // the table lives as long as the program
    if (tool->reads_run) {
      run_class.def(
          tool->python_name.c_str(),
          [tool](const Run& self, py::args args, py::kwargs kwargs) {
            const auto run = self.get();
            const nlohmann::json request = request_from_args(*tool, args, kwargs);
            nlohmann::json result;
            {
              py::gil_scoped_release release;
              result = tool->call(run.get(), request);
            }
            return json_to_python(result);
          },
          signature(*tool).c_str());
    } else {
      m.def(
          tool->python_name.c_str(),
          [tool](py::args args, py::kwargs kwargs) {
            const nlohmann::json request = request_from_args(*tool, args, kwargs);
            nlohmann::json result;
            {
              py::gil_scoped_release release;
              result = tool->call(nullptr, request);
            }
            return json_to_python(result);
          },
          signature(*tool).c_str());
    }
  }
}

}  // namespace pyag
