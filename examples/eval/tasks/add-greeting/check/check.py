"""greet(name) greets by name; hello() is unchanged."""

import sys

sys.path.insert(0, ".")  # the workspace, where the check runs

import greet

if greet.greet("Ada") != "Hello, Ada!" or greet.hello() != "Hello!":
    sys.exit("greet('Ada') must be 'Hello, Ada!' and hello() 'Hello!'")
print("ok: greet() works")
