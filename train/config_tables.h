// The run configuration's field tables (train/config_schema.cpp), for the files that read, write and
// check a config (config_load.cpp, machine_checks.cpp). Not part of the API: config.h is.
#pragma once

#include "io/field_table.h"
#include "train/config.h"

namespace train {

// The fields at the document's root; the sections follow (for_each_section).
const io::Table<Config>& root_fields();
const io::Table<TaskConfig>& task_fields();
const io::Table<ModelConfig>& model_fields();
const io::Table<TrainConfig>& train_fields();
const io::Table<OutputConfig>& output_fields();

// Calls f(key, the section's member of Config, its table) for each section, in the document's order.
template <typename F>
void for_each_section(F&& f) {
  f("task", &Config::task, task_fields());
  f("model", &Config::model, model_fields());
  f("train", &Config::train, train_fields());
  f("output", &Config::output, output_fields());
}

// What train.shards = 0 resolves to (config.h, kAutoShards).
int default_shards(const Config& config);

// Refuses (io::FieldProblem) a config whose memory estimate is over train.memory_limit_gb, naming the field
// that contributes most. `seq_len` is the task's input length T.
void check_memory(const Config& config, int seq_len);

}  // namespace train
