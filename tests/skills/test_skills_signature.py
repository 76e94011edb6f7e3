"""Failure signatures, and the merge keys of rule wordings: what is abstracted, what makes two rules one."""

from adaexplore.skills.keys import excerpt_key, rule_keys
from adaexplore.skills.signature import construct_family, construct_of, normalize_message, signature
from adaexplore.skills.similarity import tokens, weighted_jaccard

CE = "triton.compiler.errors.CompilationError"


def test_identifiers_numbers_paths_abstracted():
    a = normalize_message("RuntimeError", "Expected size [16, 32] but got (16, 64) at /home/u/kern_3.py line 45, 0x7ffabc01")
    assert a == "Expected size <shape> but got <shape> at <path> line <n>, <addr>"
    assert signature("NameError", "name 'BLOCK_SIZE_M' is not defined") == signature("NameError", "name 'acc_ptr2' is not defined")


def test_same_failure_on_different_kernels_same_signature():
    m1 = "at 14:16:\n    acc = tl.float32(acc_ptr)\n          ^\nTypeError(\"'dtype' object is not callable\")"
    m2 = "at 9:20: idx = tl.float32(offs_m) TypeError(\"'dtype' object is not callable\")"
    assert signature(CE, m1) == signature("CompilationError", m2)
    assert "tl.float32" in normalize_message(CE, m1)  # the offending construct is kept
    assert "acc_ptr" not in normalize_message(CE, m1)


def test_construct_kept_in_signature():
    relu = "module 'triton.language' has no attribute 'relu'"
    tanh = "module 'triton.language' has no attribute 'tanh'"
    assert "tl.relu" in normalize_message("AttributeError", relu)
    assert signature("AttributeError", relu) != signature("AttributeError", tanh)
    assert signature("AttributeError", relu) == signature(CE, f"at 3:4: y = tl.relu(x) AttributeError(\"{relu}\")")
    arange = "at 6:24: offs = tl.arange(0, BLOCK) ValueError(\"arange's arguments must be of type tl.constexpr\")"
    assert "tl.constexpr" in normalize_message(CE, arange)


def test_boilerplate_and_class_aliases():
    a = signature("RuntimeError", "CUDA error: an illegal memory access was encountered")
    b = signature("torch.AcceleratorError", "CUDA error: an illegal memory access was encountered. "
                  "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.")
    assert a == b


def test_construct_of():
    assert construct_of("Do not call tl.float32(x); use x.to(tl.float32)") == "tl.float32"
    assert construct_of("use tl.maximum instead of max()") == "max"
    assert construct_of("use tl.where instead of if on tensors") == "if"
    assert construct_of("tl.relu does not exist; use tl.maximum(x, 0)") == "tl.relu"
    assert construct_of("Mark BLOCK_SIZE as tl.constexpr") == "tl.constexpr"
    assert construct_of("no attribute tl.pow") == "tl.pow"
    assert construct_of("be careful") is None
    assert construct_family("tl.int32") == construct_family("tl.float16") == "tl.<dtype>"
    assert construct_family("tl.where") == "tl.where"


def test_wordings_of_one_mistake_share_a_merge_key():
    same = [
        ("tl.arange needs compile-time bounds (tl.constexpr), not values known only at launch.",
         "arange's arguments must be of type tl.constexpr"),
        ("The launch grid must be a tuple: kernel[(n,)](...), not kernel[n](...).",
         "kernel[n_blocks] fails; use kernel[(n_blocks,)]."),
        ("Do not call tl.float32(x); use x.to(tl.float32).", "Never call tl.int32(v) to cast a value; use v.to(tl.int32)."),
        ("tl.tanh does not exist; compute tanh as 2*tl.sigmoid(2*x) - 1.", "triton.language has no attribute tanh"),
        ("Use tl.where(cond, a, b) instead of a Python if on tensor values.",
         "Elementwise conditions go through tl.where, not Python if."),
    ]
    for a, b in same:
        assert set(rule_keys(a)[1:]) & set(rule_keys(b)[1:]), (a, b)


def test_near_misses_share_no_merge_key():
    apart = [
        ("tl.arange bounds must be tl.constexpr", "tl.arange sizes must be powers of two"),
        ("tl.zeros needs a constexpr shape; pass BLOCK as tl.constexpr", "tl.arange bounds must be tl.constexpr"),
        ("In a masked max reduction, load with other=-float('inf'), not other=0.", "Start a running max at -inf, not 0.0."),
        ("tl.dot needs 2-D tiles; for a vector dot product use tl.sum(a * b).",
         "Small blocks (< 16) break tl.dot; keep M, N, K >= 16 or use tl.sum of a broadcast product."),
        ("Use tl.where(cond, a, b) instead of a Python if on tensor values.",
         "Use tl.maximum(a, b) instead of Python max() on tensors."),
        ("Always mask tl.load at the tail: pass mask=offs < n.",
         "Do not build a 1-D mask for a 2-D tl.load; broadcast it like the offsets."),
    ]
    for a, b in apart:
        assert not set(rule_keys(a)[1:]) & set(rule_keys(b)[1:]), (a, b)


def test_an_error_is_evidence_only_when_it_names_what_the_rule_is_about():
    shape = "TypeError: Shape element 0 must have type `constexpr[int]`, got `constexpr[tensor]`"
    # tl.zeros and tl.full fail with this very error: it names neither, so it joins neither.
    assert excerpt_key("Never size tl.zeros with a runtime n; use a tl.constexpr BLOCK", shape) is None
    assert excerpt_key("tl.full needs a constexpr shape", shape) is None
    missing = "AttributeError: module 'triton.language' has no attribute 'tanh'"
    assert excerpt_key("Do not use tl.tanh; it is missing", missing) == excerpt_key("tl.tanh does not exist", missing)
    assert excerpt_key("tl.arange sizes must be powers of two", missing) is None


def test_api_tokens_weigh_most():
    def similarity(a, b):
        return weighted_jaccard(tokens(a), tokens(b))

    assert similarity("use tl.maximum here", "use tl.maximum there") > similarity("use the thing here", "use the thing there") - 0.5
    assert similarity("a tl.dot b", "a tl.sum b") < similarity("a tl.dot b", "c tl.dot d")
