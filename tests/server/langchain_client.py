"""Runs LangChain's embedding wrappers, as users construct them, against a server:
read by tests/server/test_langchain.py, which starts the real `bertrt serve` and runs
this file with the Python of .venv-langchain (scripts/install_deps.sh makes it; the
LangChain packages need huggingface_hub 1.x, the other tests' environment has 2.x).

stdin: a JSON list of calls, each
  {"wrapper": "tei" | "openai", "args": {constructor keyword arguments},
   "method": "embed_documents" | "embed_query" | "aembed_documents" | "aembed_query",
   "input": texts (a list) or one text}
stdout: a JSON list, per call {"vectors": ...} (a list of vectors, or one vector for
the *_query methods) or {"error": {"type": the exception's class, "message": str(e),
"status": the HTTP status the client read, when it has one}}.
"""
import asyncio
import json
import sys


def make(wrapper, args):
    if wrapper == "tei":
        # Text Embeddings Inference through huggingface_hub's InferenceClient: `model` is
        # the server's URL (what LangChain's TEI guide showed up to langchain-huggingface
        # 1.2.1; later versions refuse a URL there).
        from langchain_huggingface import HuggingFaceEndpointEmbeddings
        return HuggingFaceEndpointEmbeddings(**args)
    if wrapper == "openai":
        from langchain_openai import OpenAIEmbeddings
        return OpenAIEmbeddings(**args)
    raise ValueError(f"unknown wrapper {wrapper}")


def status_of(e):
    """The HTTP status the client read: openai's errors carry status_code, huggingface_hub's
    the response."""
    if isinstance(getattr(e, "status_code", None), int):
        return e.status_code
    return getattr(getattr(e, "response", None), "status_code", None)


def run(call):
    embeddings = make(call["wrapper"], call["args"])
    method = getattr(embeddings, call["method"])
    try:
        out = method(call["input"])
        if asyncio.iscoroutine(out):
            out = asyncio.run(out)
        return {"vectors": [list(map(float, v)) for v in out] if call["method"].endswith("documents")
                else list(map(float, out))}
    except Exception as e:  # the client's own error, as a user would see it
        return {"error": {"type": type(e).__name__, "message": str(e), "status": status_of(e)}}


def main():
    calls = json.load(sys.stdin)
    json.dump([run(c) for c in calls], sys.stdout)


if __name__ == "__main__":
    main()
