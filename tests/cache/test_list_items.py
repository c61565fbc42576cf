"""webhook.kube.list_items decodes what webhook.json_codec (rest's decoder: orjson, or the standard library
reading alike) decodes, to the same values, item by item, and refuses what orjson refuses."""

from __future__ import annotations

from typing import Any

import pytest

from webhook import json_codec
from webhook.kube import list_items

POD = {"metadata": {"name": "a", "managedFields": [{"manager": "kubelet"}]}, "spec": {"x": [1, 2.5, None]}}

DOCUMENTS = {
    "a List": json_codec.dumps(
        {"kind": "PodList", "metadata": {"resourceVersion": "7"}, "items": [POD, POD]}
    ),
    "items before metadata": json_codec.dumps({"items": [POD], "metadata": {"resourceVersion": "7"}}),
    "an empty List": b'{"kind":"PodList","items":[]}',
    "whitespace everywhere": b' \n{ "items" : [ {"a" : 1} , {"b":[ ]} ] , "metadata" : { } }\n ',
    "unicode and escapes": '{"items":[{"n":"\\u00e9t\\u00e9 \\"q\\"","m":"日本"}]}'.encode(),
    "items that are not objects": b'{"items":[1,"two",null,[3],{"x":true}]}',
    "items that are not an array": b'{"items":{"a":1},"kind":"Odd"}',
    "null items": b'{"items":null}',
    "no items": b'{"kind":"Status","code":500}',
    "an empty object": b"{}",
    "not an object": b"[1,2,3]",
    "a bare string": b'"text"',
    # the API server's integers are int64 (beyond that orjson gives a float and the standard library an int)
    "int64 extremes and floats": b'{"items":[{"n":-9223372036854775808,"m":9223372036854775807,"f":1e300}]}',
    "duplicate keys (the last wins)": b'{"items":[{"a":1,"a":2}],"items2":1}',
}


@pytest.mark.parametrize("raw", DOCUMENTS.values(), ids=DOCUMENTS.keys())
def test_decodes_to_what_orjson_decodes(raw: bytes) -> None:
    assert list_items.decode(raw, lambda item: item) == json_codec.loads(raw)


def test_each_item_goes_through_each_as_it_is_decoded() -> None:
    seen: list[Any] = []

    def each(item: Any) -> Any:
        seen.append(item)
        return {"name": item["metadata"]["name"]} if isinstance(item, dict) else item

    raw = json_codec.dumps(
        {"metadata": {"resourceVersion": "9"}, "items": [POD, {"metadata": {"name": "b"}}, 3]}
    )
    document = list_items.decode(raw, each)
    assert document == {"metadata": {"resourceVersion": "9"}, "items": [{"name": "a"}, {"name": "b"}, 3]}
    assert seen == [POD, {"metadata": {"name": "b"}}, 3]


def test_only_the_top_level_items_array_is_walked() -> None:
    calls: list[Any] = []
    raw = b'{"metadata":{"items":[1]},"spec":{"items":[2]},"items":[3]}'
    assert list_items.decode(raw, lambda item: calls.append(item) or item) == json_codec.loads(raw)
    assert calls == [3]


REFUSED = {
    "empty": b"",
    "truncated mid-item": b'{"items":[{"a":1},{"b":',
    "truncated after items": b'{"items":[{"a":1}]',
    "trailing comma in items": b'{"items":[1,]}',
    "trailing comma in the object": b'{"items":[],}',
    "missing colon": b'{"items" []}',
    "missing comma between keys": b'{"a":1 "items":[]}',
    "missing comma between items": b'{"items":[1 2]}',
    "a key that is not a string": b"{1:2}",
    "extra data after the document": b'{"items":[]} {}',
    "extra data after a scalar": b"1 2",
    "NaN": b'{"items":[{"a":NaN}]}',
    "Infinity": b'{"items":[-Infinity]}',
    "not UTF-8": b'{"items":["\xff"]}',
    "single quotes": b"{'items':[]}",
}


@pytest.mark.parametrize("raw", REFUSED.values(), ids=REFUSED.keys())
def test_refuses_what_orjson_refuses(raw: bytes) -> None:
    with pytest.raises(json_codec.DecodeError):
        json_codec.loads(raw)
    with pytest.raises(ValueError):
        list_items.decode(raw, lambda item: item)
