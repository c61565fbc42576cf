"""Label selectors in string form: what apimachinery's `labels.Parse` accepts, refuses and matches.

The facts come from upstream's tables (staging/src/k8s.io/apimachinery/pkg/labels/selector_test.go:
TestSelectorParse, TestSetSelectorParser, TestSelectorMatches, TestRequirementConstructor,
TestRequirementSelectorMatching), restated here as our own rows; the label-syntax rows follow
apimachinery's IsQualifiedName and IsValidLabelValue.
"""

from __future__ import annotations

import pytest

from webhook.policy.label_selector import (
    DOUBLE_EQUALS,
    EQUALS,
    EXISTS,
    GREATER,
    IN,
    LESS,
    NOT_EQUALS,
    NOT_EXISTS,
    NOT_IN,
    Requirement,
    SelectorError,
    parse_selector,
)

R = Requirement

# (selector, the requirements it parses to, in any order)
PARSED = [
    ("", set()),
    ("\rx", {R("x", EXISTS)}),
    ("a ", {R("a", EXISTS)}),
    ("!x", {R("x", NOT_EXISTS)}),
    ("x=a", {R("x", EQUALS, frozenset({"a"}))}),
    ("x==a", {R("x", DOUBLE_EQUALS, frozenset({"a"}))}),
    ("x!=a,y=b", {R("x", NOT_EQUALS, frozenset({"a"})), R("y", EQUALS, frozenset({"b"}))}),
    ("x=", {R("x", EQUALS, frozenset({""}))}),
    ("x= ", {R("x", EQUALS, frozenset({""}))}),
    ("x=,z= ", {R("x", EQUALS, frozenset({""})), R("z", EQUALS, frozenset({""}))}),
    ("x>1", {R("x", GREATER, frozenset({"1"}))}),
    ("x>1,z<5", {R("x", GREATER, frozenset({"1"})), R("z", LESS, frozenset({"5"}))}),
    ("x<7", {R("x", LESS, frozenset({"7"}))}),
    ("x=a,y=b,z=c", {R(k, EQUALS, frozenset({v})) for k, v in (("x", "a"), ("y", "b"), ("z", "c"))}),
    ("x in (abc,def)", {R("x", IN, frozenset({"abc", "def"}))}),
    ("foo  in\t (abc)", {R("foo", IN, frozenset({"abc"}))}),
    ("x notin\n (abc)", {R("x", NOT_IN, frozenset({"abc"}))}),
    ("x  notin\t\t\t(abc,def)", {R("x", NOT_IN, frozenset({"abc", "def"}))}),
    ("x in (abc,)", {R("x", IN, frozenset({"abc", ""}))}),
    ("x in ()", {R("x", IN, frozenset({""}))}),
    ("x notin ( )", {R("x", NOT_IN, frozenset({""}))}),
    ("x notin (, a)", {R("x", NOT_IN, frozenset({"", "a"}))}),
    ("x in (,)", {R("x", IN, frozenset({""}))}),
    ("x in (a,,b,c)", {R("x", IN, frozenset({"a", "", "b", "c"}))}),
    (
        "x notin (abc,,def),bar,z in (),w",
        {
            R("bar", EXISTS),
            R("w", EXISTS),
            R("x", NOT_IN, frozenset({"abc", "", "def"})),
            R("z", IN, frozenset({""})),
        },
    ),
    ("x,y in (a)", {R("x", EXISTS), R("y", IN, frozenset({"a"}))}),
    ("a in (x,y,notin, z,in)", {R("a", IN, frozenset({"in", "notin", "x", "y", "z"}))}),
    ("notin=in", {R("notin", EQUALS, frozenset({"in"}))}),
    ("this-is-a-dns.domain.com/key-with-dash", {R("this-is-a-dns.domain.com/key-with-dash", EXISTS)}),
    (
        "this-is-another-dns.domain.com/key-with-dash in (so,what)",
        {R("this-is-another-dns.domain.com/key-with-dash", IN, frozenset({"so", "what"}))},
    ),
    (
        "0.1.2.domain/99 notin (10.10.100.1, tick.tack.clock)",
        {R("0.1.2.domain/99", NOT_IN, frozenset({"10.10.100.1", "tick.tack.clock"}))},
    ),
    ("1234 in (bar)", {R("1234", IN, frozenset({"bar"}))}),
    ("kubernetes.io/metadata.name=team-a", {R("kubernetes.io/metadata.name", EQUALS, frozenset({"team-a"}))}),
    ("tier in (gold,silver)", {R("tier", IN, frozenset({"gold", "silver"}))}),
    ("!sandbox", {R("sandbox", NOT_EXISTS)}),
]


@pytest.mark.parametrize("text, requirements", PARSED, ids=[repr(t) for t, _ in PARSED])
def test_parses_to(text: str, requirements: set[Requirement]) -> None:
    selector = parse_selector(text)
    assert set(selector.requirements) == requirements
    assert len(selector.requirements) == len(requirements)
    assert selector.text == text


# (selector, what the error names)
REFUSED = [
    ("x=a||y=b", "a||y"),  # `|` is an identifier character, and `a||y` no label value
    ("x==a==b", "'=='"),
    ("!x=a", "'='"),
    ("x<a", "integer"),
    ("x>b", "integer"),
    ("x>1.5", "integer"),
    ("x,,y", "','"),
    (",x,y", "','"),
    ("x nott in (y)", "'nott'"),
    ("a in (xyz),", "the end"),
    ("a in (xyz)b notin ()", "'b'"),
    ("a in (xyz abc)", "'abc'"),
    ("x in (a,,)", "')'"),  # a doubled comma right before `)` is refused upstream
    ("x in (,,)", "')'"),
    ("x in (=)", "'='"),
    ("x in (a=)", "'='"),
    ("a notin(", "the end"),
    ("a (", "'('"),
    ("(", "'('"),
    ("x in a", "'a'"),
    ("x=(a)", "'('"),
    ("tier in gold", "'gold'"),
    ("a" * 254, "name"),  # the key's name part is at most 63 characters
    ("a" * 64 + "=b", "name"),
    ("x=" + "a" * 64, "value"),
    ("Example.com/x", "prefix"),  # a prefix is a lower-case DNS subdomain
    ("/x", "prefix"),
    ("a/b/c", "'/'"),
    ("x/", "name"),
    ("-x", "name"),
    ("x=-a", "value"),
    ("x in (a,-b)", "value"),
    ("x_=a", "name"),
    ("x=a b", "'b'"),
]


@pytest.mark.parametrize("text, named", REFUSED, ids=[repr(t[:40]) for t, _ in REFUSED])
def test_refuses(text: str, named: str) -> None:
    with pytest.raises(SelectorError) as err:
        parse_selector(text)
    message = str(err.value)
    assert named in message
    assert "\n" not in message


# (selector, labels, matches)
MATCHES = [
    ("", {"x": "y"}, True),
    ("", {}, True),
    ("x=y", {"x": "y"}, True),
    ("x=y,z=w", {"x": "y", "z": "w"}, True),
    ("x!=y,z!=w", {"x": "z", "z": "a"}, True),
    ("notin=in", {"notin": "in"}, True),
    ("x", {"x": "z"}, True),
    ("!x", {"y": "z"}, True),
    ("x>1", {"x": "2"}, True),
    ("x<1", {"x": "0"}, True),
    ("x=z", {}, False),
    ("x=y", {"x": "z"}, False),
    ("x=y,z=w", {"x": "w", "z": "w"}, False),
    ("x!=y,z!=w", {"x": "z", "z": "w"}, False),
    ("x", {"y": "z"}, False),
    ("!x", {"x": "z"}, False),
    ("x>1", {"x": "0"}, False),
    ("x<1", {"x": "2"}, False),
    ("foo=bar", {"foo": "bar", "baz": "blah"}, True),
    ("foo=bar,baz=blah", {"foo": "bar", "baz": "blah"}, True),
    ("foo=blah", {"foo": "bar", "baz": "blah"}, False),
    ("foo=bar,foobar=bar,baz=blah", {"foo": "bar", "baz": "blah"}, False),
    ("x in (foo),y notin (alpha)", {"x": "foo", "y": "baz"}, True),
    ("x in (foo),y in (alpha)", {"x": "foo", "y": "baz"}, False),
    ("x notin (),y", {"y": ""}, True),  # `()` is the empty value; x is absent
    ("!x,y", {"y": ""}, True),
    ("x notin (),!y", {"y": ""}, False),
    ("x in ()", {"y": "baz"}, False),
    ("x in ()", {"x": ""}, True),
    ("z>1", {"z": "2"}, True),
    ("z>1", {"z": "v2"}, False),  # not an integer: no order
    ("z<1", {"z": "-5"}, True),
    ("z>1", {}, False),
    ("z<1", {}, False),
    ("x!=a", {}, True),  # `!=` and notin hold where the label is absent
    ("x notin (a)", {}, True),
    ("x,y in (a)", {"y": "a"}, False),
    ("x==a", {"x": "a"}, True),
    ("tier in (gold,silver)", {"tier": "silver"}, True),
    ("tier in (gold,silver)", {"tier": "bronze"}, False),
    ("kubernetes.io/metadata.name=team-a", {"kubernetes.io/metadata.name": "team-a"}, True),
]


@pytest.mark.parametrize("text, labels, expected", MATCHES, ids=[f"{t!r}-{lb}" for t, lb, _ in MATCHES])
def test_matches(text: str, labels: dict[str, str], expected: bool) -> None:
    assert parse_selector(text).matches(labels) is expected
