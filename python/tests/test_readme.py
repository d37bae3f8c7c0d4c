"""The README's "From Python" example runs as written and says what its comments say."""

import re

import numpy as np
import pytest

from conftest import ROOT


def test_readme_example_runs():
    pytest.importorskip("pandas")
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## From Python"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    ns = {}
    exec(compile(code, "README.md (From Python)", "exec"), ns)
    stacks = ns["stacks"]
    # The comments in the example: the skewed item history would abort at the default 256, user is ok.
    assert stacks["item"]["runtime"][0].startswith("ids: would abort: Observed max ids per partition: 597")
    assert stacks["item"]["suggested"] == {"max_ids_per_partition": 664, "max_unique_ids_per_partition": 272}
    assert stacks["user"]["runtime"] == ["ids: ok"]
    assert ns["verdict"]["ok"] is False
    csr = ns["csr"]
    assert csr["embedding_ids"].dtype == np.int32 and csr["gains"].dtype == np.float32
    assert csr["max_ids_per_partition"] == [465, 597, 518, 423]
    df = ns["df"]
    assert list(df["fits"]) == [True, False, True, True, True, False, True, False]
