"""--max-normalized-chars on `bertrt run` and `bertrt tokenize`: a text that tokenizing cannot
cut before it passes the limit gets an error record naming the flag, the other lines run;
a long text cut by --max-length is read only as far as the cut and gives what HF gives."""
from conftest import run_jsonl

WORD = "a" * 50000  # one word: nowhere to cut it before its end
WORDS = "word " * 100000


def test_run_holds_texts_to_max_normalized_chars(bertrt_bin, default_model):
    code, out, _ = run_jsonl(bertrt_bin, ["run", default_model, "--max-normalized-chars", "10000",
                                          "--quiet"], [{"text": WORD}, {"text": WORDS}],
                             check_exit=None)
    assert code == 1
    assert "--max-normalized-chars" in out[0]["error"] and "10000" in out[0]["error"]
    assert len(out[1]["embedding"]) > 0


def test_tokenize_holds_texts_to_max_normalized_chars_only_when_asked(bertrt_bin, default_model):
    args = ["tokenize", default_model, "--max-length", "8"]
    code, out, _ = run_jsonl(bertrt_bin, [*args, "--max-normalized-chars", "10000"],
                             [{"text": WORD}, {"text": WORDS}], check_exit=None)
    assert code == 1 and "--max-normalized-chars" in out[0]["error"]
    assert out[1]["input_ids"] == [101] + [2773] * 6 + [102]
    assert out[1]["offsets"][1:7] == [[5 * i, 5 * i + 4] for i in range(6)]
    _, out, _ = run_jsonl(bertrt_bin, args, [{"text": WORD}])  # no limit by default
    assert out[0]["input_ids"] == [101, 100, 102]  # [UNK]: longer than a word may be
