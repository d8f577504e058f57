"""../shared/tools/mock_vendor_server.py plus Together's legacy inference API (`POST /api/inference`),
which HELM's TogetherClient speaks and the shared mock does not. Same answers (a pure function of model
and prompt, cut by the stop sequences and max_tokens), same --log-jsonl records (wire
"together-inference"). Also Together's models list (`GET <base>/models`), which HELM's
TogetherChatClient reads once for each model's default stop tokens (TOGETHER_MODELS).

    python tests/mock_vendor_plus.py --tools ../shared/tools --port 0 --port-file F --log-jsonl L
"""
from __future__ import annotations

import json
import re
import sys
import time
import urllib.parse
from pathlib import Path


# `GET .../models`: Together's list for the models the mock is asked through TogetherChatClient (the
# public jury's Llama judge), with the default stop tokens Together gives them.
TOGETHER_MODELS = [{"id": "meta-llama/Llama-3.3-70B-Instruct-Turbo", "object": "model", "type": "chat",
                    "config": {"stop": ["<|eot_id|>", "<|eom_id|>"]}}]


def main(argv: list[str]) -> int:
    tools = Path(argv[argv.index("--tools") + 1])
    rest = argv[:argv.index("--tools")] + argv[argv.index("--tools") + 2:]
    sys.path.insert(0, str(tools))
    import mock_openai_server as base
    import mock_vendor_server as vendor

    class Handler(vendor.Handler):
        def do_GET(self) -> None:
            if urllib.parse.urlsplit(self.path).path.rstrip("/").endswith("/models"):
                return self._send(200, TOGETHER_MODELS)
            return super().do_GET()

        def do_POST(self) -> None:
            if urllib.parse.urlsplit(self.path).path.rstrip("/") != "/api/inference":
                return super().do_POST()
            t0 = time.time()
            _, body = self._read_body()
            body = body if isinstance(body, dict) else {}
            status, resp, info = self._together(body)
            self.server.stats.count("together-inference", info.get("model", ""), status)
            self._log({"t": round(t0, 6), "wire": "together-inference", "method": "POST", "path": "/api/inference",
                       "query": {}, "headers": self._headers_for_log(), "body": body, "status": status, **info})
            self._send(status, resp)

        def _together(self, body):
            model = str(body.get("model") or "")
            prompt = str(body.get("prompt") or "")
            answers = self._answers(model, prompt, int(body.get("n") or 1), body.get("stop"), body.get("max_tokens"))
            choices = []
            for _, _, text, why in answers:
                # SentencePiece-style tokens ("▁" for a leading space) with log-probabilities, one missing.
                tokens = [t.replace(" ", "▁") for t in re.findall(r"\s*\S+", text)]
                logprobs = [None if i == 1 else -0.25 * (i + 1) for i in range(len(tokens))]
                choices.append({"text": text.replace(" ", "▁") if why == "length" else text,
                                "finish_reason": "length" if why == "length" else "stop",
                                "logprobs": {"tokens": tokens, "token_logprobs": logprobs}})
            ptok = base.count_tokens(prompt)
            ctok = sum(base.count_tokens(a[2]) for a in answers)
            resp = {"output": {"choices": choices, "raw_compute_time": 0.125,
                               "usage": {"prompt_tokens": ptok, "completion_tokens": ctok}}, "status": "finished"}
            return 200, resp, self._info(model, prompt, answers, body.get("max_tokens"), body.get("stop"))

    vendor.Handler = Handler
    return vendor.main(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
