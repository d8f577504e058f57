"""HELM's `HuggingFaceClient`: a Hugging Face causal LM run in this process (transformers `generate`).

Private-tier text may not leave the machine, so the people who evaluate on it run open models on
their own hardware; this client is that path, reproduced as HELM 0.5.16 runs it
(`helm/clients/huggingface_client.py`):

* The prompt: the request's `prompt` as is, or, when the tokenizer has a chat template (or the
  deployment sets `apply_chat_template: true`), the chat template applied to the request's
  `messages` (or to the prompt as one user message) with the generation prompt added.
* Generation: `model.generate(**tokenizer(prompt), do_sample=True, temperature=1e-7 if the request
  asks 0 else its temperature, top_p, max_new_tokens=max_tokens, num_return_sequences,
  pad_token_id=<tokenizer eos>, return_dict_in_generate, output_scores)`. A request with stop
  sequences passes the one stop sequence that encodes to a single token as `eos_token_id` (then the
  model's own eos no longer stops it); otherwise each stop sequence becomes a stopping criterion that
  ends the whole generate call when every sequence ends with it.
* Output: each generated id decoded alone (a lone byte of a multi-byte character is U+FFFD), the text
  `batch_decode` of the ids (special tokens kept); the logprob of each token taken from the
  *processed* scores (after the temperature), so it is 0.0 for every token of a temperature-0
  request. That is a HELM bug, kept: the completion's logprob and the stats built on it are HELM's;
  the model's own log-probability of each token (from the raw logits) is stored beside the answer
  (`completions.model_logprobs`, view `local_logprobs`).
  Then `truncate_sequence` with the tokenizer config's `end_of_text_token`; `finish_reason` unset.
* One model per HELM model name and process, loaded on the first request (weights through the
  normal Hugging Face cache; a folder path is resolved against the working directory, as HELM does).
  Device: the deployment's `device` / `device_map` argument, else CUDA when torch sees one, else
  Apple's MPS, else the CPU (HELM: CUDA, else CPU).

Batching (ours): HELM sends local requests one at a time. Here the requests that reach one model at
the same time, from every run of the invocation, are generated together (`batch_size` in the
deployment settings, default 8 for float32 weights; 1 is HELM's way), grouped by generation
arguments and sorted by prompt length (left padding, with the attention mask). A batched answer is
kept only when it is certain to be what the request alone gives: every token it chose must beat the
runner-up by `BATCH_MARGIN` in the raw logits (so neither the float drift of a padded batch nor the
1e-7 sampling can change it), and the first batches of each model are checked against unbatched
generation of their most padded row (a model that handles padding differently turns batching off).
Any other request is generated alone, exactly as HELM does. Sampling (temperature > 0), several
completions, multi-token stop sequences and echo requests are always generated alone.
"""
from __future__ import annotations

import logging
import queue
import threading
import time
from concurrent.futures import Future
from typing import Any, Optional

from pydantic import SecretStr

from medhelm_core import hf_hub
from medhelm_core.clients.base import Attempt, model_api, truncate_sequence
from medhelm_core.errors import MedhelmError
from medhelm_core.ratelimit import FATAL, FATAL_ENDPOINT, OK
from medhelm_core.tokenizers import HUGGINGFACE_TOKENIZER_CLASS, TokenizerError, get_tokenizer

log = logging.getLogger(__name__)

HUGGINGFACE_CLIENT_CLASS = "helm.clients.huggingface_client.HuggingFaceClient"
DEFAULT_BATCH_SIZE = 8
# A batched token is kept only if it beats the runner-up by this much in the raw logits: 400 times the
# float32 drift measured between a padded batch and the sequence alone (2.4e-7, perf/bench_local.py's
# model), and 10 times the margin above which HELM's 1e-7 temperature makes sampling one-hot
# (exp(-margin / 1e-7) underflows float32 at margin > 1.04e-5).
BATCH_MARGIN = 1e-4
CHECKED_BATCHES = 2  # per model: batches whose most padded row is also generated alone and compared
LINGER_S = 0.005  # how long the batcher waits for more requests to join the first one


def pick_device(kwargs: dict) -> Optional[str]:
    """The device HELM's HuggingFaceServer picks (None: `device_map`, accelerate places the model),
    with Apple's MPS before the CPU. Pops `device` from the from_pretrained arguments."""
    if "device_map" in kwargs:
        if "device" in kwargs:
            raise MedhelmError("At most one of `device` and `device_map` may be specified.")
        return None
    if "device" in kwargs:
        return str(kwargs.pop("device"))
    import torch

    if torch.cuda.is_available():
        return "cuda:0"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"


def pretrained_kwargs(args: dict) -> dict:
    """The deployment's client args that go to `from_pretrained` (HELM: every arg but the path, the
    end-of-text token and apply_chat_template), with "torch.bfloat16"-style dtypes made real."""
    out = {k: (v.get_secret_value() if isinstance(v, SecretStr) else v) for k, v in args.items()
           if k not in ("pretrained_model_name_or_path", "end_of_text_token", "apply_chat_template")}
    dtype = out.get("torch_dtype")
    if isinstance(dtype, str) and dtype.startswith("torch."):
        import torch

        out["torch_dtype"] = getattr(torch, dtype[len("torch."):])
    return out


class LocalModel:
    """HELM's `HuggingFaceServer`: one causal LM in this process and the HELM tokenizer it reads with."""

    def __init__(self, helm_model: str, path: str, tokenizer, kwargs: dict):
        transformers = hf_hub.transformers_module()
        import torch

        self.torch = torch
        self.name = helm_model
        kwargs = dict(kwargs)
        self.device = pick_device(kwargs)
        transformers.utils.logging.disable_progress_bar()  # our progress display is the one on stderr
        model = hf_hub.from_pretrained(transformers.AutoModelForCausalLM.from_pretrained, path,
                                       f"model {helm_model}", **kwargs)
        self.model = model.to(self.device) if self.device is not None else model
        self.tokenizer = tokenizer  # tokenizers.HuggingFaceTokenizer (its lock guards the HF tokenizer)
        self.lock = threading.Lock()  # one generate call at a time
        self.batching_ok = True
        self.checked_batches = 0
        self.counts = {"alone": 0, "batched": 0, "batches": 0, "redone": 0}
        first = next(iter(self.model.parameters()), None)
        self.float32 = first is None or first.dtype == torch.float32

    # -- HELM's serve_request: one request ---------------------------------------------------------
    def _stop_args(self, stop_sequences: list[str]) -> tuple[dict, Any]:
        if not stop_sequences:
            return {}, None
        from transformers.generation.stopping_criteria import StoppingCriteria, StoppingCriteriaList

        with self.tokenizer.lock:
            ids = self.tokenizer.hf(stop_sequences, return_token_type_ids=False, add_special_tokens=False).input_ids
        if len(ids) == 1 and len(ids[0]) == 1:
            return {"eos_token_id": ids[0][0]}, None
        torch = self.torch

        class StopAtSequence(StoppingCriteria):  # HELM's StopAtSpecificTokenCriteria
            def __init__(self, sequence):
                super().__init__()
                self.sequence = sequence

            def __call__(self, input_ids, scores, **kwargs):
                target = torch.tensor(self.sequence, device=input_ids.device, dtype=input_ids.dtype)
                return bool(torch.all(input_ids[:, -len(self.sequence):] == target).item())

        return {}, StoppingCriteriaList([StopAtSequence(s) for s in ids])

    def serve(self, raw: dict) -> dict:
        """The request alone, as HELM generates it."""
        torch = self.torch
        with self.tokenizer.lock:
            encoded = self.tokenizer.hf(raw["prompt"], return_tensors="pt", return_token_type_ids=False)
            pad_token_id = self.tokenizer.hf.eos_token_id
        encoded = encoded.to(0 if self.device is None else self.device)
        optional, stopping = self._stop_args(raw["stop_sequences"])
        input_length = len(encoded.input_ids[0])
        logprobs_only = raw["max_new_tokens"] == 0 and raw["num_return_sequences"] == 1 and raw["echo_prompt"]
        with self.lock:
            if logprobs_only:
                with torch.no_grad():
                    output = self.model(encoded["input_ids"])
                sequences, scores, raw_scores = encoded["input_ids"], output.logits, None
            else:
                output = self.model.generate(
                    **encoded, temperature=raw["temperature"], num_return_sequences=raw["num_return_sequences"],
                    max_new_tokens=raw["max_new_tokens"], top_p=raw["top_p"], do_sample=True,
                    return_dict_in_generate=True, output_scores=True, output_logits=True, **optional,
                    stopping_criteria=stopping, pad_token_id=pad_token_id)
                sequences, scores, raw_scores = output.sequences, output.scores, output.logits
            self.counts["alone"] += 1
        prompt_logprobs = []
        if logprobs_only:
            prompt_logprobs.append(0.0)
            for c in range(raw["num_return_sequences"]):
                for i in range(len(sequences[c]) - 1):
                    prompt_logprobs.append(torch.nn.functional.log_softmax(scores[c][i], dim=0)
                                           [sequences[c][i + 1]].item())
        completions_ids, logprobs, model_logprobs = [], [], []
        for c in range(raw["num_return_sequences"]):
            steps = range(len(sequences[c]) - input_length)
            chosen = [sequences[c][i + input_length] for i in steps]
            logprobs.append([torch.nn.functional.log_softmax(scores[i][c], dim=0)[t].item() for i, t in zip(steps, chosen)])
            model_logprobs.append([] if raw_scores is None else
                                  [torch.nn.functional.log_softmax(raw_scores[i][c].float(), dim=0)[t].item()
                                   for i, t in zip(steps, chosen)])
            seq = sequences[c] if raw["echo_prompt"] else sequences[c][input_length:]
            completions_ids.append([int(t) for t in seq])
        return self._decoded(completions_ids, logprobs, model_logprobs, prompt_logprobs, input_length)

    def _decoded(self, ids: list[list[int]], logprobs, model_logprobs, prompt_logprobs, input_length) -> dict:
        hf = self.tokenizer.hf
        with self.tokenizer.lock:
            tokens = [[hf.decode(t) for t in seq] for seq in ids]
            texts = hf.batch_decode(ids)
        completions = [{"text": text, "tokens": toks, "logprobs": lp, "model_logprobs": mlp,
                        "prompt_logprobs": prompt_logprobs}
                       for text, toks, lp, mlp in zip(texts, tokens, logprobs, model_logprobs)]
        return {"completions": completions, "input_length": input_length, "ids": ids}

    # -- ours: several requests of the same generation arguments in one generate call ---------------
    @staticmethod
    def batchable(raw: dict) -> bool:
        return (raw["num_return_sequences"] == 1 and not raw["echo_prompt"] and raw["temperature"] == 1e-7
                and raw["max_new_tokens"] > 0)

    def serve_batch(self, raws: list[dict]) -> list[dict]:
        """Each request's answer, equal to `serve(raw)`; rows that cannot be shown equal are redone alone."""
        torch = self.torch
        with self.tokenizer.lock:
            ids = [self.tokenizer.hf(r["prompt"], return_token_type_ids=False)["input_ids"] for r in raws]
            pad = self.tokenizer.hf.eos_token_id
        optional, stopping = self._stop_args(raws[0]["stop_sequences"])
        if stopping is not None:  # HELM's criteria stop the whole call: not batchable
            return [self.serve(r) for r in raws]
        width = max(len(i) for i in ids)
        device = 0 if self.device is None else self.device
        input_ids = torch.tensor([[pad] * (width - len(i)) + i for i in ids], device=device)
        mask = torch.tensor([[0] * (width - len(i)) + [1] * len(i) for i in ids], device=device)
        first = raws[0]
        with self.lock:
            output = self.model.generate(
                input_ids=input_ids, attention_mask=mask, temperature=first["temperature"], num_return_sequences=1,
                max_new_tokens=first["max_new_tokens"], top_p=first["top_p"], do_sample=True,
                return_dict_in_generate=True, output_scores=True, output_logits=True, **optional,
                pad_token_id=pad)
            self.counts["batches"] += 1
        eos = self._eos_ids(optional)
        answers: list[dict | None] = []
        for b, raw in enumerate(raws):
            generated = [int(t) for t in output.sequences[b][width:]]
            for n, t in enumerate(generated):  # after its eos a row is only padding
                if t in eos:
                    generated = generated[:n + 1]
                    break
            lp, mlp, sure = [], [], True
            for i, token in enumerate(generated):
                logits = output.logits[i][b].float()
                top = torch.topk(logits, 2)
                if int(top.indices[0]) != token or float(top.values[0] - top.values[1]) < BATCH_MARGIN:
                    sure = False
                    break
                lp.append(torch.nn.functional.log_softmax(output.scores[i][b], dim=0)[token].item())
                mlp.append(torch.nn.functional.log_softmax(logits, dim=0)[token].item())
            answers.append(self._decoded([generated], [lp], [mlp], [], len(ids[b])) if sure else None)
        if self.checked_batches < CHECKED_BATCHES and width > min(len(i) for i in ids):
            self.checked_batches += 1
            probe = min(range(len(ids)), key=lambda b: len(ids[b]))  # the most padded row
            if answers[probe] is not None and self.serve(raws[probe])["ids"] != answers[probe]["ids"]:
                log.warning("model %s: a padded batch generated other tokens than the request alone; "
                            "batching is off for this model", self.name)
                self.batching_ok = False
                return [self.serve(r) for r in raws]
        out = []
        for raw, answer in zip(raws, answers):
            if answer is None:
                self.counts["redone"] += 1
                answer = self.serve(raw)
            else:
                self.counts["batched"] += 1
            out.append(answer)
        return out

    def _eos_ids(self, optional: dict) -> set[int]:
        if "eos_token_id" in optional:
            return {int(optional["eos_token_id"])}
        configured = getattr(self.model.generation_config, "eos_token_id", None)
        if configured is None:
            configured = getattr(self.model.config, "eos_token_id", None)
        if configured is None:
            return set()
        return {int(t) for t in (configured if isinstance(configured, (list, tuple)) else [configured])}


class Batcher:
    """Gathers the requests that reach one model at the same time and serves them in batches."""

    def __init__(self, model: LocalModel, batch_size: int):
        self.model = model
        self.batch_size = batch_size
        self.queue: queue.Queue = queue.Queue()
        self.thread: threading.Thread | None = None
        self.start_lock = threading.Lock()

    def submit(self, raw: dict) -> dict:
        if self.batch_size <= 1 or not self.model.batching_ok or not LocalModel.batchable(raw):
            return self.model.serve(raw)
        future: Future = Future()
        self.queue.put((raw, future))
        with self.start_lock:
            if self.thread is None:
                self.thread = threading.Thread(target=self._loop, name=f"batcher-{self.model.name}", daemon=True)
                self.thread.start()
        return future.result()

    def _loop(self) -> None:
        while True:
            try:
                items = [self.queue.get(timeout=1.0)]
            except queue.Empty:
                with self.start_lock:  # idle: end, unless a request arrived meanwhile
                    if self.queue.empty():
                        self.thread = None
                        return
                continue
            deadline = time.monotonic() + LINGER_S
            while len(items) < 4 * self.batch_size:
                try:
                    items.append(self.queue.get(timeout=max(0.0, deadline - time.monotonic())))
                except queue.Empty:
                    break
            groups: dict[tuple, list] = {}
            for raw, future in items:
                key = (raw["temperature"], raw["max_new_tokens"], raw["top_p"], tuple(raw["stop_sequences"]))
                groups.setdefault(key, []).append((raw, future))
            for members in groups.values():
                members.sort(key=lambda m: len(m[0]["prompt"]))
                for start in range(0, len(members), self.batch_size):
                    chunk = members[start:start + self.batch_size]
                    try:
                        answers = (self.model.serve_batch([r for r, _ in chunk]) if len(chunk) > 1
                                   else [self.model.serve(chunk[0][0])])
                    except BaseException as e:  # noqa: BLE001 - each caller gets the error
                        for _, future in chunk:
                            future.set_exception(e)
                        continue
                    for (_, future), answer in zip(chunk, answers):
                        future.set_result(answer)


_MODELS: dict[tuple, Batcher] = {}
_MODELS_LOCK = threading.Lock()


def _batcher(helm_model: str, path: str, tokenizer, kwargs: dict, batch_size: Optional[int]) -> Batcher:
    """HELM's HuggingFaceServerFactory: one model per HELM model name (and folder) per process."""
    key = hf_hub.instance_key(helm_model, path, kwargs)
    with _MODELS_LOCK:
        batcher = _MODELS.get(key)
        if batcher is None:
            model = LocalModel(helm_model, path, tokenizer, kwargs)
            size = batch_size if batch_size is not None else (DEFAULT_BATCH_SIZE if model.float32 else 1)
            batcher = _MODELS[key] = Batcher(model, size)
        elif batch_size is not None:
            batcher.batch_size = batch_size
        return batcher


class HuggingFaceLocalClient:
    """One `HuggingFaceClient` deployment: its prompt rule, its tokenizer and the (shared) model."""

    in_process = True

    def __init__(self, deployment, tokenizer, end_of_text_token: Optional[str], batch_size: Optional[int] = None):
        args = deployment.client_spec.args
        self.deployment = deployment.name
        self.path = args.get("pretrained_model_name_or_path")
        self.kwargs = pretrained_kwargs(args)
        self.tokenizer = tokenizer
        self.end_of_text_token = args.get("end_of_text_token", end_of_text_token)
        self.batch_size = batch_size
        chat = args.get("apply_chat_template")
        self.apply_chat_template = bool(tokenizer.hf.chat_template) if chat is None else bool(chat)
        self._batchers: dict[str, Batcher] = {}

    def __repr__(self) -> str:
        return f"HuggingFaceLocalClient({self.deployment!r}, path={self.path!r})"

    def prompt(self, request: dict) -> str:
        """HELM's `get_prompt`; ValueError where HELM raises NonRetriableException."""
        messages = request.get("messages")
        if request.get("prompt") and messages:
            raise ValueError("More than one of `prompt` and `messages` was set in request")
        if self.apply_chat_template:
            chat = messages if messages else [{"role": "user", "content": request["prompt"]}]
            with self.tokenizer.lock:
                return self.tokenizer.hf.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        if messages:
            raise ValueError("Chat mesages not supported by non-chat model")
        return request["prompt"]

    def raw_request(self, request: dict) -> dict:
        return {
            "engine": request["model"].split("/", 1)[-1],
            "prompt": self.prompt(request),
            "temperature": 1e-7 if request["temperature"] == 0 else request["temperature"],
            "num_return_sequences": request["num_completions"],
            "max_new_tokens": request["max_tokens"],
            "top_p": request["top_p"],
            "echo_prompt": request["echo_prompt"],
            "top_k_per_token": request["top_k_per_token"],
            "stop_sequences": request["stop_sequences"],
        }

    def batcher(self, helm_model: str) -> Batcher:
        found = self._batchers.get(helm_model)
        if found is None:
            found = self._batchers[helm_model] = _batcher(helm_model, self.path or helm_model, self.tokenizer,
                                                          self.kwargs, self.batch_size)
        return found

    def attempt(self, request: dict) -> Attempt:
        if request.get("embedding"):
            return Attempt(FATAL, message="Computing the embedding is unavailable in this client")
        try:
            raw = self.raw_request(request)
        except ValueError as e:
            return Attempt(FATAL, message=f"invalid request: {e}")
        start = time.time()
        try:
            response = self.batcher(request["model"]).submit(raw)
        except hf_hub.LocalModelUnavailable as e:
            return Attempt(FATAL_ENDPOINT, message=str(e))
        except Exception as e:  # noqa: BLE001 - HELM: "HuggingFace error: ..." fails the run
            return Attempt(FATAL, message=f"HuggingFace error: {e}")
        elapsed = time.time() - start
        completions = []
        for c in response["completions"]:
            tokens, logprob = [], 0.0
            if request["echo_prompt"]:
                prompt_part = c["tokens"][:response["input_length"]]
                generated = c["tokens"][response["input_length"]:]
                lps = c["prompt_logprobs"][:response["input_length"]] or [0.0] * len(prompt_part)
                for text, lp in zip(prompt_part, lps):
                    tokens.append({"text": text, "logprob": lp})
                    logprob += lp
            else:
                generated = c["tokens"]
            for text, lp in zip(generated, c["logprobs"]):
                tokens.append({"text": text, "logprob": lp})
                logprob += lp
            completion = truncate_sequence({"text": c["text"], "logprob": logprob, "tokens": tokens}, request,
                                           end_of_text_token=self.end_of_text_token)
            completions.append(completion)
        result = {"success": True, "embedding": [], "completions": completions, "cached": False,
                  "request_time": elapsed, "request_datetime": int(start)}
        usage = {"prompt_tokens": response["input_length"],
                 "completion_tokens": sum(len(ids) for ids in response["ids"])}
        return Attempt(OK, result=result, status=200, usage=usage,
                       untruncated=[c["text"] for c in response["completions"]] if request.get("stop_sequences") else None,
                       model_logprobs=[c["model_logprobs"] for c in response["completions"]])


@model_api(HUGGINGFACE_CLIENT_CLASS, in_process=True)
def huggingface_local_client(deployment, credentials, max_concurrency: int | None = None, timeout_s: float = 600.0,
                             tokenizer_config=None, batch_size: int | None = None) -> HuggingFaceLocalClient:
    """The in-process client of a `helm.clients.huggingface_client.HuggingFaceClient` deployment.

    Its tokenizer is the deployment's `tokenizer_name`, which must be a HuggingFaceTokenizer in
    `tokenizer_configs.yaml` (as HELM requires); the model's config is read now, so a model that is
    neither a folder nor in the Hugging Face cache is named before any request is sent."""
    spec = getattr(tokenizer_config, "tokenizer_spec", None)
    if spec is None or spec.class_name != HUGGINGFACE_TOKENIZER_CLASS:
        raise MedhelmError(f"deployment {deployment.name!r}: its tokenizer {deployment.tokenizer_name!r} must be a "
                           f"{HUGGINGFACE_TOKENIZER_CLASS} in tokenizer_configs.yaml, as HELM's HuggingFaceClient "
                           f"requires")
    try:
        tokenizer = get_tokenizer(deployment.tokenizer_name, tokenizer_config)
    except TokenizerError as e:
        raise MedhelmError(f"deployment {deployment.name!r}: {e}") from None
    path = deployment.client_spec.args.get("pretrained_model_name_or_path") or deployment.model_name
    transformers = hf_hub.transformers_module()
    hf_hub.from_pretrained(transformers.AutoConfig.from_pretrained, str(path), f"model {deployment.model_name}")
    return HuggingFaceLocalClient(deployment, tokenizer, tokenizer_config.end_of_text_token, batch_size)
