#!/usr/bin/env python3
"""Every command in README.md's ```sh blocks, run (or its smoke variant) so none can rot.

Each command (a logical line: continuations joined, comments dropped) must match one rule below:
  run      run it from a scratch directory (build/, scripts/, samples/ and /tmp paths mapped)
           with the smoke flags appended
           (a sample trains 1 epoch on 512 images, width 64 as width 8; the PyTorch evaluation
           reads 256 test images; a Google Benchmark program lists its benchmarks; the last
           repeated flag wins, so appended flags override the README's);
  covered  another test runs it: a ctest test of that name must exist (or .ci/run must name the
           script), and a script's or program's --help must still list every flag the README
           passes it;
  skip     cannot run on one machine (several hosts), with the test that emulates it.
A command no rule matches fails the test, naming it: a new README command needs a rule.
The commands run as one bash script in README order (variables like $R and $D carry over).

Usage: readme_commands.py SOURCE_DIR BUILD_DIR SCRATCH
"""
import os
import re
import shlex
import shutil
import subprocess
import sys

SAMPLE_SMOKE = "--train-limit 512 --test-limit 256 --eval-batch 128 --epochs 1 --no-plot"
MPI_ROOT = "--allow-run-as-root --oversubscribe" if os.geteuid() == 0 else "--oversubscribe"

# (pattern, action, detail): the first match wins. For "run", detail is (substitutions, append).
RULES = [
    (r"^bash scripts/main\.sh", "run", ([], SAMPLE_SMOKE)),
    (r"^bash scripts/(test|asan|tsan)\.sh|^FUZZ_SECONDS=\S+ bash scripts/fuzz\.sh", "covered", ".ci/run"),
    (r"^R=", "run", ([], "")),
    (r"^\$R ", "run", ([(r"--max-steps 100", "--max-steps 2"), (r"--width 64\b", "--width 8")], SAMPLE_SMOKE)),
    (r"^/usr/bin/python3 samples/resnet18_fashion_mnist/eval_torch\.py", "run", ([], "--limit 256")),
    (r"^build/samples/resnet18/resnet18 ", "run", ([], "")),
    (r"^D=|^build/tools/spmd-(run|opt)/|^dot ", "run", ([], "")),
    (r"^mpirun .*--hostfile", "skip", "dist_two_hosts"),
    (r"^printf .*> hosts$", "skip", "dist_two_hosts"),
    (r"^mpirun -np 2 --bind-to none build/samples/resnet18_fashion_mnist/", "run",
     ([(r"^mpirun ", "mpirun " + MPI_ROOT + " ")], SAMPLE_SMOKE)),
    (r"^build/benchmarks/bench_gpu_step", "covered", "bench_gpu_step_smoke"),
    (r"^bash tests/install/check_package\.sh ", "covered", "package_outside_project"),
    (r"^build/samples/libtorch_dlpack/libtorch_dlpack$", "covered", "sample_libtorch_dlpack"),
    (r"^build/benchmarks/bench_", "run", ([], "--benchmark_list_tests=true")),
    (r"^(/usr/bin/)?python3 benchmarks/(\w+)\.py", "covered", "bench_{script}_smoke"),
]


def commands(readme):
    """(block index, command) for every command of every ```sh block."""
    text = open(readme).read()
    for index, block in enumerate(re.findall(r"```sh\n(.*?)```", text, re.S)):
        lines = block.replace("\\\n", " ").splitlines()
        for line in lines:
            # A comment starts at '#' after blanks (outside quotes: the README's commands have none).
            code = re.sub(r"(^|\s)#.*$", "", line).strip()
            for part in code.split(" ; "):  # "$R --max-steps 100 ; $R --resume ..."
                if part.strip():
                    yield index, re.sub(r"\s+", " ", part.strip())


def match(command):
    for pattern, action, detail in RULES:
        found = re.search(pattern, command)
        if found:
            return action, detail, found
    return None, None, None


def flags_of(command):
    return sorted(set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", command)))


def check_covered(command, detail, found, source, build, ctest_names):
    """The test named exists, and the program still takes every flag the README gives it."""
    if detail == ".ci/run":
        script = re.search(r"scripts/\w+\.sh", command).group(0)
        if script not in open(os.path.join(source, ".ci/run")).read() and script != "scripts/test.sh":
            return "%s is not run by .ci/run" % script
        return None
    name = detail.format(script=found.group(2) if found.lastindex and found.lastindex >= 2 else "")
    if name not in ctest_names:
        return "no ctest test %s runs it" % name
    if shlex.split(command)[0] == "bash":  # a test script: its ctest test runs it as written
        return None
    program = shlex.split(command)[0]
    if program.endswith("python3"):
        program = [program, os.path.join(source, shlex.split(command)[1])]
    else:
        program = [os.path.join(build, program[len("build/"):])]
    help_text = subprocess.run(program + ["--help"], capture_output=True, text=True, timeout=120)
    if help_text.returncode != 0:
        return "%s --help failed: %s" % (" ".join(program), help_text.stderr.strip()[-300:])
    missing = [f for f in flags_of(command) if not re.search(re.escape(f) + r"(?![\w-])", help_text.stdout)]
    if missing:
        return "%s --help does not list %s" % (" ".join(program), ", ".join(missing))
    return None


def smoke(command, detail, source, build, scratch):
    """The command as run from the scratch directory (so runs/ lands there)."""
    substitutions, append = detail
    for pattern, replacement in substitutions:
        command = re.sub(pattern, replacement, command)
    command = re.sub(r"(?<![\w/.])build/", build + "/", command)
    command = re.sub(r"(?<![\w/.])(scripts|samples|benchmarks)/", source + r"/\1/", command)
    command = command.replace("/tmp/ir", scratch + "/ir").replace("/tmp/graph", scratch + "/graph")
    return command + (" " + append if append else "")


def main():
    source, build, scratch = (os.path.abspath(p) for p in sys.argv[1:4])
    shutil.rmtree(scratch, ignore_errors=True)  # no run directory left from an earlier run
    os.makedirs(scratch)
    listed = subprocess.run(["ctest", "-N"], cwd=build, capture_output=True, text=True, check=True).stdout
    ctest_names = set(re.findall(r"Test\s+#\d+: (\S+)", listed))
    failures, scripts, counts = [], {}, {"run": 0, "covered": 0, "skip": 0}
    for index, command in commands(os.path.join(source, "README.md")):
        action, detail, found = match(command)
        if action is None:
            failures.append("no rule in tests/readme_commands.py for README command: %s" % command)
            continue
        counts[action] += 1
        if action == "skip":
            if detail not in ctest_names:
                failures.append("%s: skipped for %s, which is no ctest test" % (command, detail))
            print("skip     %s  (several hosts; emulated by %s)" % (command, detail))
        elif action == "covered":
            problem = check_covered(command, detail, found, source, build, ctest_names)
            if problem:
                failures.append("%s: %s" % (command, problem))
            print("covered  %s  (%s)" % (command, detail.format(script=found.group(2) if found.lastindex and found.lastindex >= 2 else "")))
        else:
            scripts.setdefault(index, []).append(smoke(command, detail, source, build, scratch))
    env = dict(os.environ, BUILD_DIR=build, OMP_NUM_THREADS="1", SPMD_FASHION_MNIST_DIR=os.environ.get(
        "SPMD_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))
    # One script for every block, in order: variables set in one block ($R) are used in later ones.
    lines = ["set -euo pipefail"]
    for index in sorted(scripts):
        lines.append("echo '== README block %d' >&2" % index)
        lines.extend(scripts[index])
    script = "\n".join(lines) + "\n"
    print("running:\n  " + script.strip().replace("\n", "\n  "), flush=True)
    done = subprocess.run(["bash", "-c", script], cwd=scratch, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=1700)
    if done.returncode != 0:
        failures.append("a README command failed (exit %d); its output:\n%s" % (
            done.returncode, done.stdout[-4000:]))
    print("README commands: %d run, %d covered by other tests, %d skipped" %
          (counts["run"], counts["covered"], counts["skip"]))
    if failures:
        print("\n".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
