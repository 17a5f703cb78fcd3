"""Item families as core/items.py names them: one place knows the prefixes."""

from babelrun.core.items import bare_name, is_family


def test_family_prefixes():
    assert [bare_name(p) for p in ("truncate", "agent:step_pad", "cs:shuffle", "pairs:LLMBar_Natural")] == [
        "truncate", "step_pad", "shuffle", "LLMBar_Natural"]
    assert is_family("agent:step_pad", "agentic") and not is_family("step_pad", "agentic")
    assert is_family("pairs:LLMBar_Natural@zh-en-switched", "labelled")
    assert is_family("cs:truncate", "code_switched") and is_family("tie_probe:en", "tie_probe")
    assert is_family("truncate", "text") and not is_family("agent:step_pad", "text")
