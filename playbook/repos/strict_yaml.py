"""A YAML loader for settings files that reads a plain scalar as a boolean, a number or null
only when every YAML version reads it so; any other scalar stays the string it was written as.

PyYAML follows YAML 1.1, where `yes`, `on`, `y` are true, `0x10` is 16, `010` is 8, `1_0` is 10
and `1:20` is 80; YAML 1.2 (and most editors, linters and people) read them otherwise. A
settings file must mean one thing, so those spellings reach the checks as strings and are
refused there with the key named, instead of being read as something nobody wrote.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

# Whole numbers in decimal, without a leading zero (octal in YAML 1.1) or underscores; at most
# 18 digits, so Python never converts a 5,000-digit run (that raises ValueError) and the match
# is one linear pass. Longer runs stay strings and are refused as not a whole number.
_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]{0,17})\Z")
# Decimal fractions with a point, as YAML 1.2 writes them (0.05, .5, 1.0e-2): the only float
# setting, min_relevance, is one. No `1_0.5` or `1:20.5` (YAML 1.1), no .inf or .nan; bounded
# runs, one linear pass. A whole-number key refuses a float as it refuses the string.
_FLOAT = re.compile(r"[-+]?(?:[0-9]{1,18}\.[0-9]{0,18}|\.[0-9]{1,18})(?:[eE][-+][0-9]{1,3})?\Z")
_BOOL = re.compile(r"(?:true|True|TRUE|false|False|FALSE)\Z")
_NULL = re.compile(r"(?:~|null|Null|NULL|)\Z")


class SettingsLoader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2's core spellings for true/false and null, and decimal integers.

    Floats only as decimal fractions with a point; no dates or merge keys: no setting takes
    one, and a value written so is refused by the key's check as the string it is.
    """

    # Not the parent's table: only the resolvers added below.
    yaml_implicit_resolvers: dict[Any, Any] = {}


SettingsLoader.add_implicit_resolver("tag:yaml.org,2002:bool", _BOOL, list("tTfF"))
SettingsLoader.add_implicit_resolver("tag:yaml.org,2002:int", _INT, list("-+0123456789"))
SettingsLoader.add_implicit_resolver("tag:yaml.org,2002:null", _NULL, ["~", "n", "N", ""])
# After the int resolver: `5` is a whole number, `5.0` a float.
SettingsLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+.0123456789"))


# SafeConstructor's bool reads the YAML 1.1 table (yes, on...); only true/false arrive here
# implicitly, but an explicit `!!bool yes` would too, so the constructor is as strict.
def _strict_bool(loader: SettingsLoader, node: yaml.ScalarNode) -> Any:
    value = str(loader.construct_scalar(node))
    if not _BOOL.match(value):
        return value  # a string: the key's check refuses it, naming the key
    return value.lower() == "true"


def _strict_int(loader: SettingsLoader, node: yaml.ScalarNode) -> Any:
    value = str(loader.construct_scalar(node))
    if not _INT.match(value):
        return value  # `!!int 0x10`: a string for the check to refuse
    return int(value)


def _strict_float(loader: SettingsLoader, node: yaml.ScalarNode) -> Any:
    value = str(loader.construct_scalar(node))
    if not _FLOAT.match(value):
        return value  # `!!float 1_0.5` or `!!float .inf`: a string for the check to refuse
    return float(value)


SettingsLoader.add_constructor("tag:yaml.org,2002:bool", _strict_bool)
SettingsLoader.add_constructor("tag:yaml.org,2002:float", _strict_float)
SettingsLoader.add_constructor("tag:yaml.org,2002:int", _strict_int)
