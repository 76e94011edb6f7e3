from adaexplore.skills.signature import construct_family, construct_of, normalize_message, signature
from adaexplore.skills.similarity import RuleView, match_rule, similarity

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


def _rule(rid, text):
    return RuleView(id=rid, text=text, construct=construct_of(text))


def test_dtype_casts_merge_across_dtypes():
    existing = [_rule("r-1", "Do not call tl.float32(x); use x.to(tl.float32)")]
    d = match_rule("Never call tl.int32(v) to cast, use v.to(tl.int32) instead", None, existing)
    assert d.rule_id == "r-1" and d.reason


def test_near_misses_do_not_merge():
    existing = [_rule("r-w", "use tl.where instead of if on tensors")]
    d = match_rule("use tl.maximum instead of max() on tensors", None, existing)
    assert d.rule_id is None
    assert d.reason.startswith("new rule")
    # wording nearly identical, forbidden constructs differ: still apart
    existing = [_rule("r-w2", "Do not use if on tensor values in a kernel; use tl.where")]
    d = match_rule("Do not use max() on tensor values in a kernel; use tl.maximum", None, existing)
    assert d.rule_id is None and d.reason.startswith("new rule")
    existing = [_rule("r-a", "tl.arange bounds must be tl.constexpr: declare BLOCK as tl.constexpr")]
    assert match_rule("tl.arange length must be a power of two; use triton.next_power_of_2", None,
                      existing).rule_id is None


def test_api_tokens_weigh_most():
    assert similarity("use tl.maximum here", "use tl.maximum there") > similarity("use the thing here", "use the thing there") - 0.5
    assert similarity("a tl.dot b", "a tl.sum b") < similarity("a tl.dot b", "c tl.dot d")


def test_signature_match_merges():
    existing = [RuleView(id="r-s", text="guard the loop body with a mask", signatures=["sig-abc"])]
    d = match_rule("something worded very differently", "sig-abc", existing)
    assert d.rule_id == "r-s" and "signature" in d.reason
