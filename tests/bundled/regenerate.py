"""Re-measure the bundled model's pins (tests/bundled/en_de_expected.json) after models/en-de was
replaced on purpose. Run from the repository root:

    python -m tests.bundled.regenerate

It serves models/en-de with the torch backend on CPU, exactly as the tests do
(tests/bundled/expectations.py), writes the answers and the BLEU of the slice, and prints the
BLEU. README.md's examples are not rewritten: tests/bundled/test_readme.py names what changed.
"""
from __future__ import annotations

import json
import sys

from tests.bundled.expectations import EXPECTED_FILE, REPO, measure, torch_settings


def dumps(expected: dict) -> str:
    """JSON with one hypothesis a line: a regenerated file's diff then reads hypothesis by hypothesis."""
    def one(value) -> str:
        return json.dumps(value, ensure_ascii=False)

    cases = []
    for case in expected["cases"]:
        nbests = ",\n   ".join("[" + ",\n    ".join(one(h) for h in nbest) + "]" for nbest in case["translations"])
        cases.append(f'  {{"request": {one(case["request"])},\n   "translations": [\n   {nbests}]}}')
    head = ",\n".join(f" {one(key)}: {one(value)}" for key, value in expected.items() if key != "cases")
    return "{\n" + head + ',\n "cases": [\n' + ",\n".join(cases) + "\n ]\n}\n"


def main() -> int:
    expected = measure(torch_settings())
    text = dumps(expected)
    assert json.loads(text) == expected
    EXPECTED_FILE.write_text(text, encoding="utf-8")
    bleu = expected["bleu_slice"]
    print(f"wrote {EXPECTED_FILE.relative_to(REPO)}: {len(expected['cases'])} requests; first {bleu['sentences']} "
          f"sentences of {bleu['split']}: BLEU {bleu['bleu']} cased, {bleu['bleu_lowercase']} lowercased")
    return 0


if __name__ == "__main__":
    sys.exit(main())
