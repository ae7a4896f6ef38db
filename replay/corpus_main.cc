// `replay_corpus DIR [--count N] [--seed S] [--preset medium|large]`: writes
// the synthetic replay corpus (corpus.h) — N bundles, each with its hidden
// .truth.json — for the accuracy benchmark of `fathom replay`.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "replay/corpus.h"

int main(int argc, char** argv) {
  fathom::replay::CorpusOptions opt;
  CLI::App app{"write seeded evidence bundles from simulator runs with one random fault each"};
  app.add_option("dir", opt.dir, "output directory (DIR/NNN per bundle)")->required();
  app.add_option("--count", opt.count, "bundles to write")->check(CLI::Range(1, 100000));
  app.add_option("--seed", opt.seed, "corpus seed");
  app.add_option("--preset", opt.preset, "topology preset")
      ->check(CLI::IsMember({"small", "medium", "large"}));
  app.add_flag("--progress", opt.progress, "a line per bundle on stderr");
  app.footer(
      "Exit status: 0 when every bundle was written; 1 when a scenario failed to run or "
      "a file could not be written; 2 for a bad flag.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  auto r = fathom::replay::MakeCorpus(opt);
  if (!r.ok()) {
    std::fprintf(stderr, "replay_corpus: %s\n", r.status().message().c_str());
    return 1;
  }
  std::printf("%zu bundles in %s\n", r->size(), opt.dir.c_str());
  return 0;
}
