#!/usr/bin/env python3
"""Runs a command for ctest and passes only when it exits 0 (or the status --status names) AND
its output (stdout and stderr) matches a regular expression (searched with re.DOTALL, so .* spans
lines). ctest's own PASS_REGULAR_EXPRESSION ignores the exit status: a smoke benchmark that
printed its line and then failed would pass. Exit status 77 (the test's "skipped") is passed
through. --status N checks a refusal: the command must print its message and exit N.

usage: expect_output.py [--status N] REGEX -- COMMAND [ARG...]"""
import re
import subprocess
import sys


def main():
    args = sys.argv[1:]
    expected = 0
    if len(args) >= 2 and args[0] == "--status":
        expected, args = int(args[1]), args[2:]
    if len(args) < 3 or args[1] != "--":
        sys.exit("usage: expect_output.py [--status N] REGEX -- COMMAND [ARG...]")
    pattern, command = args[0], args[2:]
    p = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    sys.stdout.write(p.stdout)
    if p.returncode == 77 and expected != 77:
        return 77
    if p.returncode != expected:
        print("expect_output: %s exited %d, not %d" % (command[0], p.returncode, expected))
        return 1
    if not re.search(pattern, p.stdout, re.DOTALL):
        print("expect_output: the output does not match %r" % pattern)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
