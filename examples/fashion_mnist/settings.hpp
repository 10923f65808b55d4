// Every setting of the run: the command-line options and the hyperparameters (the students' chosen on the validation
// split; the others fixed before the first run).
#pragma once

#include <cstdint>
#include <string>

namespace fmnist {

struct Settings {
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  std::string out_dir = "fashion-mnist-out";
  std::uint64_t seed = 1;
  bool quick = false;  // a smoke run: fewer epochs everywhere (targets are not expected to hold)

  // Data use (dataset.hpp's TrainingSplit).
  std::int64_t validation_images = 5000;
  std::int64_t student_images = 1000;
  std::int64_t calibration_images = 2000;

  // Teacher 784-512-256-10: Adam, cosine decay.
  int teacher_epochs = 12;
  std::int64_t batch_size = 128;
  double teacher_learning_rate = 1e-3;

  // Gradual magnitude pruning to 90 % (Zhu & Gupta) while fine-tuning; the steps after the schedule ends fine-tune
  // at 90 %.
  int gradual_epochs = 6;
  double gradual_pruning_share = 2.0 / 3.0;  // the schedule ends after this share of the fine-tuning steps
  std::int64_t gradual_frequency = 50;       // steps between pruning steps
  double finetune_learning_rate = 2e-4;

  // 2:4 masked fine-tuning.
  int nm_finetune_epochs = 2;

  // Students 784-64-10 on the labelled subset: Adam, cosine decay; the KD one with Hinton's loss.
  int student_hidden = 64;
  int student_epochs = 100;
  std::int64_t student_batch_size = 50;
  double student_learning_rate = 3e-3;
  double kd_temperature = 4.0;
  double kd_alpha = 0.9;

  // Shorter everything, for a CI smoke run within a minute.
  void make_quick() {
    quick = true;
    teacher_epochs = 1;
    gradual_epochs = 1;
    nm_finetune_epochs = 1;
    student_epochs = 30;
  }
};

}  // namespace fmnist
