# Type stubs for the raspc package (the implementation is python/raspc/__init__.py and the native
# module raspc._raspc); kept in step with it by tests/test_python.py's signature check.
import os
from typing import Any, Literal, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

__version__: str

Token = Union[str, int, float, bool]
Input = Union[str, Sequence[Token], np.ndarray]
Inputs = Union[Input, Sequence[Input]]
Attention = Literal["hard", "soft"]
PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

class RaspcError(ValueError):
    """An error reported by raspc; an error about a place in a program carries it."""

    code: Optional[str]
    file: Optional[str]
    line: Optional[int]
    column: Optional[int]
    end_line: Optional[int]
    end_column: Optional[int]
    diagnostics: Optional[list[dict[str, Any]]]

class Model:
    summary: str
    def __init__(self, native: Any, summary: Optional[str] = ...) -> None: ...
    @property
    def config(self) -> dict[str, Any]: ...
    @property
    def layout(self) -> list[dict[str, Any]]: ...
    @property
    def output(self) -> dict[str, Any]: ...
    @property
    def vocab(self) -> list[Token]: ...
    @property
    def token_ids(self) -> dict[str, int]: ...
    @property
    def is_real(self) -> bool: ...
    @property
    def causal(self) -> bool: ...
    @property
    def max_len(self) -> int: ...
    @property
    def tolerance(self) -> float: ...
    @property
    def dim_names(self) -> list[str]: ...
    @property
    def weights(self) -> Mapping[str, np.ndarray]: ...
    def _repr_html_(self) -> str: ...
    def run(self, inputs: Inputs, attention: Attention = ..., *, batch: Optional[bool] = ...) -> list[Any]: ...
    def readout(self, inputs: Inputs, attention: Attention = ..., *, batch: Optional[bool] = ...) -> Union[np.ndarray, list[np.ndarray]]: ...
    def decode(self, readout: Any) -> list[Any]: ...
    def encode(self, inputs: Inputs) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]: ...
    def verify(self, samples: int = ..., seed: int = ..., attention: Literal["hard", "soft", "both"] = ..., exhaustive: bool = ...) -> dict[str, Any]: ...
    def to_bytes(self) -> bytes: ...
    def save(self, path: PathLike, force: bool = ...) -> None: ...
    def to_onnx(self, path: Optional[PathLike] = ..., attention: Optional[Attention] = ...) -> Optional[bytes]: ...
    def plot_head(self, layer: int, head: int, circuit: Literal["qk", "ov"] = ..., symlog: bool = ..., linthresh: Optional[float] = ..., all_dims: bool = ...) -> Any: ...
    def plot_mlp(self, layer: int, which: Literal["in", "gate", "out"] = ..., symlog: bool = ..., linthresh: Optional[float] = ..., all_dims: bool = ...) -> Any: ...
    def to_torch(self, dtype: Any = ...) -> Any: ...
    def to_transformer_lens(self, device: str = ...) -> Any: ...

class Universal(Model):
    shape: Tuple[int, int, int, int]
    bound: float
    split: Optional[int]
    def __init__(self, native: Any, shape: Tuple[int, int, int, int], bound: float, summary: str, split: Optional[int] = ...) -> None: ...
    def encode_instance(self, x: Any, a: Any, v: Any) -> list[float]: ...
    def simulate(self, x: Any, a: Any, v: Any, attention: Attention = ...) -> np.ndarray: ...

class HeadSimulation:
    output: np.ndarray
    expected: np.ndarray
    bound: float
    max_abs_err: float
    vacuous: bool
    bounds: Any
    u: Universal
    def __init__(self, output: np.ndarray, expected: np.ndarray, u: Universal, bounds: Any) -> None: ...

def compile(
    source: str,
    vocab: Optional[Union[str, Sequence[Token]]] = ...,
    max_len: Optional[int] = ...,
    causal: bool = ...,
    input_bounds: Optional[Union[str, Tuple[float, float]]] = ...,
    entry: Optional[str] = ...,
    *,
    path: Optional[PathLike] = ...,
    mlp: Literal["relu", "gated"] = ...,
    numerical: Sequence[str] = ...,
    categorical: Sequence[str] = ...,
    input_grid: Optional[Union[str, Tuple[float, float, float]]] = ...,
    pl_error: Optional[float] = ...,
) -> Model: ...
def compile_file(
    path: PathLike,
    vocab: Optional[Union[str, Sequence[Token]]] = ...,
    max_len: Optional[int] = ...,
    causal: bool = ...,
    input_bounds: Optional[Union[str, Tuple[float, float]]] = ...,
    entry: Optional[str] = ...,
    *,
    mlp: Literal["relu", "gated"] = ...,
    numerical: Sequence[str] = ...,
    categorical: Sequence[str] = ...,
    input_grid: Optional[Union[str, Tuple[float, float, float]]] = ...,
    pl_error: Optional[float] = ...,
) -> Model: ...
def eval(source: str, input: Input, entry: Optional[str] = ..., *, path: Optional[PathLike] = ..., causal: bool = ...) -> list[Any]: ...
def load(path: PathLike) -> Model: ...
def from_bytes(data: Union[bytes, bytearray, memoryview]) -> Model: ...
def universal(n: int, d: int, dv: int, heads: int = ..., mlp: Literal["gated", "relu"] = ..., bound: float = ..., x_bound: Optional[float] = ..., v_bound: Optional[float] = ..., *, split: bool = ...) -> Universal: ...
def simulate_head(
    x: Any,
    a: Any = ...,
    v: Any = ...,
    *,
    w_q: Any = ...,
    w_k: Any = ...,
    w_v: Any = ...,
    scale: float = ...,
    mlp: Literal["gated", "relu"] = ...,
    split: bool = ...,
) -> HeadSimulation: ...
