#!/usr/bin/env python3
"""Runs a command for ctest and passes only when it exits 0 AND its output (stdout and stderr)
matches a regular expression (searched with re.DOTALL, so .* spans lines). ctest's own
PASS_REGULAR_EXPRESSION ignores the exit status: a smoke benchmark that printed its line and
then failed would pass. Exit status 77 (the test's "skipped") is passed through.

usage: expect_output.py REGEX -- COMMAND [ARG...]"""
import re
import subprocess
import sys


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit("usage: expect_output.py REGEX -- COMMAND [ARG...]")
    pattern, command = sys.argv[1], sys.argv[3:]
    p = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    sys.stdout.write(p.stdout)
    if p.returncode == 77:
        return 77
    if p.returncode != 0:
        print("expect_output: %s exited %d" % (command[0], p.returncode))
        return 1
    if not re.search(pattern, p.stdout, re.DOTALL):
        print("expect_output: the output does not match %r" % pattern)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
