"""Write the labeled rule corpus ``rules.jsonl`` of the skill-memory benchmark.

Runs on the local machine, once, after ``make_errors.py`` (its ``errors.json`` holds the error
texts of the interpreter, ``errors_gpu.json`` those of the GPU for the cases that are silent in the
interpreter). Every rule below was written by hand, in many voices: terse and wordy, do-first and
don't-first, code-heavy and prose-only. Its label is its group: rules of one group describe the
same mistake with the same fix; groups that share an API (three tl.dot mistakes, two masking
mistakes, a masked max's fill value vs a running max's start value, three constexpr mistakes)
must stay apart. A rule marked 1 carries the real error text of its group's failing kernel
(when that kernel raised one in the interpreter, or else on the GPU), as an agent that read the
failure would.

    python benchmarks/memory_corpus/build_rules.py
"""

import json

G = {
"tanh_missing": ("tanh_missing", [
 ("tl.tanh does not exist; compute tanh as 2*tl.sigmoid(2*x) - 1.", 1),
 ("There is no tl.tanh in triton.language. Build it from tl.sigmoid: tanh(x) = 2*tl.sigmoid(2x) - 1.", 1),
 ("Never call tl.tanh(x): the module has no tanh. Use 2 * tl.sigmoid(2 * x) - 1 instead.", 0),
 ("tanh: not in tl. Write `t = 2.0 * tl.sigmoid(2.0 * v) - 1.0`.", 1),
 ("Use tl.sigmoid to express tanh, do not call tl.tanh (AttributeError: no attribute 'tanh').", 0),
 ("triton.language has no attribute tanh", 1),
 ("Do not use tl.tanh; it is missing from triton.language.", 1),
 ("tl.tanh is not available; implement tanh via tl.exp: (1 - e^-2x)/(1 + e^-2x).", 0),
]),
"libdevice_none": ("libdevice_tanh_none", [
 ("libdevice.tanh returns None in the CPU interpreter; compute tanh with tl.sigmoid instead.", 1),
 ("Under TRITON_INTERPRET=1, libdevice.tanh gives None, so multiplying its result fails. Avoid libdevice.tanh there.", 1),
 ("Do not rely on libdevice.tanh in interpreted kernels: it yields None. Use 2*tl.sigmoid(2x)-1.", 0),
 ("libdevice.tanh(x) -> None when interpreted; the next arithmetic raises NoneType errors.", 1),
 ("Avoid libdevice.tanh; in the interpreter it returns None. Write tanh from tl.exp.", 1),
 ("NoneType operand after libdevice.tanh: the interpreter does not implement it, so don't call libdevice.tanh.", 0),
 ("Never use libdevice.tanh when the kernel must run under the interpreter.", 1),
]),
"atomic_zeros": ("atomic_add_empty_buffer", [
 ("The output buffer of tl.atomic_add must start at zero: allocate it with torch.zeros, not torch.empty.", 0),
 ("Do not allocate an atomic_add target with torch.empty; use torch.zeros.", 0),
 ("torch.empty leaves garbage in memory, and tl.atomic_add accumulates on top of it. Use torch.zeros for accumulation buffers.", 0),
 ("Accumulators fed by tl.atomic_add: create them with torch.zeros(...) (never torch.empty).", 0),
 ("Zero-initialize buffers that kernels atomically add into; torch.empty is uninitialized.", 0),
 ("Never use torch.empty for a buffer you tl.atomic_add into; use torch.zeros instead.", 0),
 ("atomic_add results were off by a random offset because the buffer came from torch.empty; use torch.zeros.", 0),
 ("Replace torch.empty with torch.zeros for the atomic_add output.", 0),
]),
"arange_constexpr": ("arange_runtime_bound", [
 ("tl.arange bounds must be tl.constexpr; pass the block size as a constexpr parameter, not a runtime int.", 1),
 ("Declare the size given to tl.arange as BLOCK: tl.constexpr.", 1),
 ("Do not pass a runtime argument to tl.arange; its arguments must be constexpr.", 1),
 ("tl.arange(0, n) with n a plain int argument fails: mark n as tl.constexpr.", 1),
 ("arange's arguments must be of type tl.constexpr", 1),
 ("Never call tl.arange with runtime bounds; make them constexpr and mask the tail.", 0),
 ("Use a constexpr BLOCK for tl.arange and compare offsets against the runtime n with a mask.", 0),
 ("tl.arange needs compile-time bounds (tl.constexpr), not values known only at launch.", 1),
]),
"arange_pow2": ("arange_not_power_of_two", [
 ("tl.arange sizes must be powers of two; round up with triton.next_power_of_2 and mask.", 1),
 ("The range of tl.arange must be a power of 2. Use triton.next_power_of_2(n) for BLOCK.", 1),
 ("Do not use a BLOCK of 10 or 48 for tl.arange: only powers of two work.", 1),
 ("arange's range must be a power of 2", 1),
 ("Pad the block to the next power of two (triton.next_power_of_2) for tl.arange, and mask the extra lanes.", 0),
 ("tl.arange(0, 10) fails: the length has to be a power of two.", 1),
 ("Never pick a non power of two block size for tl.arange.", 0),
]),
"linear_weight": ("linear_weight_transposed", [
 ("nn.Linear's weight is (out_features, in_features); load it transposed before tl.dot(x, w).", 1),
 ("nn.Linear stores weight as (out, in), so y = x @ W.T: index the weight as w[k, n] = W[n, k].", 1),
 ("Do not treat nn.Linear.weight as (in, out); it is (out, in). Transpose with tl.trans or swap the strides.", 0),
 ("input and other must have equal reduction dimensions: the nn.Linear weight was loaded as (out, in) instead of transposed.", 1),
 ("The weight of nn.Linear has shape (out_features, in_features): for x @ W^T use tl.trans on the loaded weight tile.", 1),
 ("Linear layers: weight is [out, in]; multiply by its transpose.", 0),
 ("Remember F.linear computes x @ weight.T; the nn.Linear weight is (out, in), never (in, out).", 0),
]),
"dtype_call": ("dtype_called_as_cast", [
 ("Do not call tl.float32(x); use x.to(tl.float32).", 1),
 ("Never call tl.int32(v) to cast a value; use v.to(tl.int32) instead.", 0),
 ("tl.float16(y) is not callable; convert with y.to(tl.float16).", 1),
 ("'dtype' object is not callable: cast with .to(tl.float32), not tl.float32(...).", 1),
 ("Dtypes are not functions in Triton. Cast with x.to(dtype).", 1),
 ("Use v.to(tl.bfloat16) to cast; calling tl.bfloat16(v) raises a TypeError.", 0),
 ("Avoid tl.float32(acc) as a conversion; write acc.to(tl.float32).", 1),
 ("Cast tensors via .to(tl.float32); tl.float32 is a dtype, not a cast function.", 0),
]),
"item_in_kernel": (None, [
 ("Never call .item() inside a @triton.jit function.", 0),
 (".item() is host-side; in a kernel the loaded value is already a scalar.", 0),
 ("Do not use x.item() in a Triton kernel; use the value returned by tl.load directly.", 0),
 ("Inside @triton.jit, skip .item(): tl.load of one element already gives a scalar.", 0),
 ("Calling .item() on a loaded value in a kernel is a host-side habit; drop it and use the loaded scalar.", 0),
 ("Avoid .item() in device code; use the tl.load result as is.", 0),
 ("Don't convert loaded values with .item() in kernels: tl.load(ptr) is already the scalar you want.", 0),
]),
"dot_min16": ("dot_too_small", [
 ("tl.dot needs every dimension (M, N, K) to be at least 16; use BLOCK sizes >= 16.", 0),
 ("Do not use tl.dot on 8x8 tiles: the tile sizes must be 16 or more in each dimension.", 0),
 ("For tl.dot, pick BLOCK_M, BLOCK_N and BLOCK_K of at least 16.", 0),
 ("Small blocks (< 16) break tl.dot on the GPU; keep M, N, K >= 16 or use tl.sum of a broadcast product.", 1),
 ("tl.dot's minimum tile is 16 in each of M, N, K.", 1),
 ("Never size a tl.dot tile below 16 along any dimension.", 0),
]),
"dot_dtype": ("dot_mixed_dtypes", [
 ("Both operands of tl.dot must have the same dtype; cast one with .to() first.", 1),
 ("tl.dot(a, b) with a fp32 and b fp16 fails: convert b with b.to(tl.float32).", 1),
 ("Do not mix fp16 and fp32 operands in tl.dot; cast them to one dtype with .to.", 1),
 ("Both operands must be same dtype: cast the fp16 tile with .to(tl.float32) before tl.dot.", 1),
 ("Before tl.dot, make the two tiles one dtype (x.to(y.dtype)).", 0),
 ("tl.dot refuses operands of different dtypes. Use .to to align them.", 1),
 ("Mixed-precision tl.dot inputs: cast with .to so both are fp16 (or both fp32).", 0),
]),
"dot_1d": ("dot_one_dimensional", [
 ("tl.dot needs 2-D tiles; for a vector dot product use tl.sum(a * b).", 1),
 ("Do not pass 1-D blocks to tl.dot: input and other must have equal ranks >= 2. Use tl.sum(a*b, axis=0).", 1),
 ("A dot product of two vectors is tl.sum(a * b), not tl.dot(a, b).", 1),
 ("Never call tl.dot on rank-1 tensors; reduce the product with tl.sum.", 0),
 ("tl.dot is a matrix product of 2-D tiles only; vectors need tl.sum(x * y).", 1),
 ("input and other must have equal ranks >= 2", 1),
]),
"mask_missing": (None, [
 ("Always mask tl.load at the tail: pass mask=offs < n.", 0),
 ("Do not call tl.load without a mask when the last block runs past n.", 0),
 ("Loads past the end of the tensor read garbage; give tl.load mask=offsets < n_elements.", 0),
 ("Mask every tl.load whose offsets can exceed the tensor size (mask=offs < N).", 0),
 ("Never load the tail block unmasked; use mask=idx < n in tl.load.", 0),
 ("An unmasked tl.load on the last program reads out of bounds: add mask=o < n.", 0),
 ("When n is not a multiple of BLOCK, tl.load needs mask=offs < n.", 0),
]),
"mask_shape": ("mask_shape_mismatch", [
 ("The mask must have the same shape as the pointer block: build it from the same row and column offsets.", 1),
 ("Do not build a 1-D mask for a 2-D tl.load; broadcast it like the offsets (rows[:, None] & cols[None, :]).", 1),
 ("Cannot make_shape_compatible in tl.load: the mask's shape differs from the offsets' shape.", 1),
 ("A tl.load mask of shape (2*BLOCK,) for a (BLOCK, BLOCK) pointer block fails; give the mask the block's shape.", 1),
 ("Match mask and pointer shapes in tl.load/tl.store; derive the mask from the same broadcast offsets.", 0),
 ("Never pass a mask whose dimensions differ from the loaded tile.", 0),
 ("incompatible dimensions between mask and offsets: make the mask 2-D like the pointers.", 1),
]),
"max_fill": (None, [
 ("In a masked max reduction, load with other=-float('inf'), not other=0.", 0),
 ("Do not fill masked lanes with 0 before tl.max; negative rows then reduce to 0. Use other=-inf.", 0),
 ("tl.load(..., mask=m, other=0.0) followed by tl.max is wrong for all-negative inputs: use other=float('-inf').", 0),
 ("For tl.max over a masked load, the fill value must be -inf.", 0),
 ("Masked-out elements of a max reduction need other=-float('inf') in tl.load.", 0),
 ("Never pad a max-reduction load with zeros; pad with -inf.", 0),
 ("Row max came out 0 for negative rows because of other=0 in the masked load; set other=-inf.", 0),
]),
"running_max": (None, [
 ("Start a running max at -inf, not 0.0.", 0),
 ("Initialize the online-softmax running max m to -float('inf') before the loop.", 0),
 ("Do not initialize the loop-carried maximum with 0; negative inputs never exceed it.", 0),
 ("m_i = tl.full([BLOCK_M], -float('inf'), tl.float32) is the right start of a running max; zeros are wrong.", 0),
 ("A running maximum across blocks must begin at minus infinity.", 0),
 ("Never seed the running max of a streaming reduction with 0.0.", 0),
 ("Use -inf as the initial value of the running max in tl.maximum(m, tl.max(x, axis=0)) loops.", 0),
]),
"if_tensor": ("python_if_on_tensor", [
 ("Use tl.where(cond, a, b) instead of a Python if on tensor values.", 0),
 ("Do not branch with a Python if on a block of values; select with tl.where.", 0),
 ("Data-dependent if statements on tensors are wrong in Triton kernels; use tl.where.", 1),
 ("Replace `if x > 0:` on a loaded tile with tl.where(x > 0, ...).", 1),
 ("Never write a Python if on tensor values inside a kernel; use tl.where.", 0),
 ("Elementwise conditions go through tl.where, not Python if.", 0),
]),
"max_builtin": (None, [
 ("Use tl.maximum(a, b) instead of Python max() on tensors.", 0),
 ("Do not call max() on tiles inside a kernel; call tl.maximum.", 0),
 ("Python's max(x, 0.0) on a block is wrong in Triton; write tl.maximum(x, 0.0).", 0),
 ("Never use the builtin max() on tensor values; use tl.maximum.", 0),
 ("ReLU in a kernel: tl.maximum(x, 0.0), not max(x, 0.0).", 0),
 ("Elementwise maximum is tl.maximum; Python max() does not apply elementwise.", 0),
]),
"program_id_axis": ("program_id_axis_three", [
 ("tl.program_id axis must be 0, 1 or 2; fold extra grid dimensions into one axis.", 1),
 ("Do not call tl.program_id(3): only axes 0 to 2 exist. Flatten the fourth dimension into axis 2.", 1),
 ("program_id axis must be 0, 1, or 2", 1),
 ("A grid has at most three axes; compute extra indices from tl.program_id(2) with // and %.", 0),
 ("Never use tl.program_id with an axis above 2.", 1),
 ("Launch grids are 3-D at most: decompose a 4-D index from one tl.program_id axis.", 0),
]),
"zeros_constexpr": ("zeros_runtime_shape", [
 ("tl.zeros needs a constexpr shape; pass BLOCK as tl.constexpr, not a runtime n.", 1),
 ("Do not call tl.zeros((n,), ...) with a runtime n; the shape must be constexpr.", 1),
 ("Shape element 0 must have type constexpr[int]: make tl.zeros' shape a tl.constexpr.", 1),
 ("Accumulators from tl.zeros need compile-time shapes (tl.constexpr block sizes).", 1),
 ("Never size tl.zeros with a kernel argument that is not constexpr.", 0),
 ("tl.zeros([BLOCK], dtype=tl.float32) with BLOCK: tl.constexpr, never with a runtime length.", 0),
]),
"sum_axis": ("sum_axis_out_of_range", [
 ("tl.sum(x, axis=1) on a 1-D block is out of bounds; use axis=0.", 1),
 ("The axis of tl.sum must exist in the block: a 1-D tile only has axis 0.", 1),
 ("Do not reduce a 1-D tensor with axis=1 in tl.sum.", 1),
 ("axis 1 out of bounds for shape: the tl.sum axis must be smaller than the block's rank.", 1),
 ("Check the rank before tl.sum(axis=...): 1-D blocks reduce over axis=0 only.", 0),
 ("Never pass an axis to tl.sum that the tile does not have.", 0),
]),
"grid_tuple": ("grid_not_a_tuple", [
 ("The launch grid must be a tuple: kernel[(n,)](...), not kernel[n](...).", 1),
 ("Do not launch with kernel[1](...); the grid is a tuple like (1,).", 1),
 ("object of type 'int' has no len(): the grid passed to kernel[grid] must be a tuple.", 1),
 ("Write grids as tuples (or a lambda returning a tuple), never a bare int.", 0),
 ("kernel[n_blocks] fails; use kernel[(n_blocks,)].", 1),
 ("Grid = (triton.cdiv(n, BLOCK),) with the trailing comma: a bare int is not a grid.", 0),
]),
"helper_not_jit": ("plain_python_helper", [
 ("Helper functions called from a kernel must be @triton.jit themselves.", 1),
 ("Do not call a plain Python function inside a @triton.jit kernel; decorate the helper with @triton.jit.", 1),
 ("A kernel can only call other @triton.jit functions (or tl builtins); mark helpers @triton.jit at module level.", 0),
 ("name 'helper' is not defined inside the kernel: define helpers at module level with @triton.jit.", 1),
 ("Never call an undecorated Python helper from device code.", 0),
 ("Define device helpers at module scope and decorate them with @triton.jit, not as nested Python functions.", 1),
]),
"ptr_float_offset": ("float_pointer_offset", [
 ("Pointer offsets must be integers; do not add a float block to a pointer.", 1),
 ("invalid operands of type pointer<fp32> and float32: cast offsets to an integer type before adding them to a pointer.", 1),
 ("Never multiply tl.arange by 1.0 before pointer arithmetic: offsets have to stay integer.", 1),
 ("Offsets added to pointers need an integer dtype; use .to(tl.int32) if they became float.", 1),
 ("Keep index math in integers; a float offset plus a pointer is a type error.", 0),
 ("Do not compute pointer offsets with float arithmetic.", 0),
]),
"reshape_numel": ("reshape_wrong_numel", [
 ("tl.reshape cannot change the number of elements: the new shape's product must equal the old one.", 1),
 ("Do not tl.reshape a 16-element block to (4, 8); numel must stay the same.", 1),
 ("reshape() cannot change total number of elements in tensor", 1),
 ("Check that the target shape of tl.reshape has as many elements as the block.", 0),
 ("Never reshape a tile into a shape with a different element count.", 0),
 ("A tl.reshape target must multiply out to the source numel.", 1),
]),
"store_block_scalar": ("store_tensor_to_scalar_pointer_block", [
 ("Do not store a block of values through a scalar pointer; reduce it first (tl.sum) or offset the pointer with tl.arange.", 1),
 ("Value argument cannot be block type if pointer argument is not a block: make the pointer a block (ptr + offs).", 1),
 ("tl.store(y_ptr, x) with x a block fails; use tl.store(y_ptr + offs, x).", 1),
 ("To store a tile, the pointer must be a tile of addresses too; add tl.arange offsets to it.", 0),
 ("Never tl.store a whole block to a single scalar address.", 0),
 ("Scalar pointer, block value in tl.store: either reduce the value or broadcast the pointer.", 1),
]),
"cast_before_exp": ("exp_of_integer_block", [
 ("tl.exp needs a floating-point input; cast integers with .to(tl.float32) first.", 1),
 ("Do not call tl.exp on an int32 block: it expects fp32 or fp64.", 1),
 ("Expected dtype ['fp32', 'fp64'] but got int32: convert to float before tl.exp.", 1),
 ("Math functions like tl.exp and tl.log only take floats; cast ints with .to(tl.float32).", 0),
 ("Never pass integer tensors to tl.exp.", 0),
 ("tl.exp of an integer tile fails in Triton; use x.to(tl.float32) first.", 1),
]),
"host_list": ("host_tensor_arg_as_python_list", [
 ("Pass torch tensors to a kernel, never Python lists: 'list' object has no attribute 'dtype'.", 1),
 ("Do not hand a Python list to a Triton kernel launch; wrap it with torch.tensor(..., device=x.device).", 1),
 ("Kernel arguments that are read with tl.load must be torch tensors, not lists.", 0),
 ("'list' object has no attribute 'dtype' at launch: convert the list with torch.tensor first.", 1),
 ("Never launch a kernel with a list where it expects a pointer; use torch.tensor.", 0),
 ("Lists are not pointers: build a torch.tensor on the device before the launch.", 1),
 ("Convert host-side Python sequences to torch.tensor before passing them to kernel[grid](...).", 0),
]),
"static_range_constexpr": ("static_range_runtime_bound", [
 ("tl.static_range needs a constexpr bound; use range() for loops bounded by a runtime argument.", 0),
 ("Do not unroll with tl.static_range(n) when n is a runtime int; mark n tl.constexpr or use range(n).", 1),
 ("tl.static_range is compile-time unrolling: its bound must be tl.constexpr.", 0),
 ("Never give tl.static_range a runtime loop count.", 1),
 ("Unrolled loops (tl.static_range) only take constexpr bounds; plain range() handles runtime bounds.", 0),
 ("static_range over a kernel argument is wrong unless the argument is declared tl.constexpr.", 1),
 ("Use range(n) (not tl.static_range(n)) for runtime trip counts.", 0),
]),
"contiguous_strides": (None, [
 ("Call .contiguous() on inputs before launching a kernel that assumes row-major strides.", 0),
 ("Do not assume a transposed or sliced input is contiguous; pass its strides or call x.contiguous().", 0),
 ("Kernels that index with n_cols as the row stride need x.contiguous() first.", 0),
 ("Never compute offsets as row * N + col for a tensor that may be non-contiguous; use x.stride(0) or .contiguous().", 0),
 ("Make inputs contiguous (x = x.contiguous()) when the kernel hard-codes a row-major layout.", 0),
 ("Permuted inputs break kernels that assume packed rows; call .contiguous() or pass strides.", 0),
 ("Before the launch, x.contiguous(): a view from .t() or a slice has other strides.", 0),
]),
"output_dtype": (None, [
 ("Allocate the output with the input's dtype (torch.empty_like(x)), not a hard-coded float32.", 0),
 ("Do not return a float32 output for a float16 model; create it with torch.empty_like(x) or x.dtype.", 0),
 ("The output tensor must have the reference's dtype; use torch.empty(..., dtype=x.dtype).", 0),
 ("Never hard-code torch.float32 for outputs when inputs may be half precision; follow x.dtype.", 0),
 ("Match the output dtype to the input: torch.empty_like(x), or cast the result with .to(x.dtype) before returning.", 0),
 ("Returning fp32 from a fp16 reference fails the dtype check; allocate outputs with dtype=x.dtype.", 0),
 ("Output buffers take the model's dtype (torch.empty_like), not torch.float32.", 0),
]),
}

LATER = {
# Written after the failure-concept thesaurus of skills/concepts.py, in voices it was not written
# for: new wordings of known mistakes, and new near misses (tl.arange's order, tl.zeros' power of two,
# tl.full's constexpr shape, which fails with the very error of tl.zeros', tl.where's condition,
# .item() on the host). Rows are marked "set": "later" so results can be read for them alone.
"tanh_missing": ("tanh_missing", [
 ("AttributeError on tl.tanh: Triton's language module ships no tanh; use (e^{2x}-1)/(e^{2x}+1) with tl.exp.", 1),
 ("Reached for tl.tanh in a GELU; it isn't there. The sigmoid-based formula works.", 0),
]),
"libdevice_none": ("libdevice_tanh_none", [
 ("In interpreter mode, don't count on libdevice.tanh: the call evaluates to None.", 0),
]),
"atomic_zeros": ("atomic_add_empty_buffer", [
 ("Buffers receiving tl.atomic_add partial sums need zeros at the start (torch.zeros), else you add to leftover memory.", 0),
 ("split-K reduction via atomics: output = torch.zeros(...), never torch.empty(...).", 0),
]),
"arange_constexpr": ("arange_runtime_bound", [
 ("BLOCK_SIZE must be annotated `: tl.constexpr` when it is used as the tl.arange end.", 1),
 ("A ValueError about arange arguments means the bound was a runtime value: make it a constexpr kernel parameter.", 1),
]),
"arange_pow2": ("arange_not_power_of_two", [
 ("tl.arange(0, 96) is illegal; the length must be 2^k (64, 128, ...).", 1),
 ("Non-power-of-2 row lengths: set BLOCK = triton.next_power_of_2(n_cols) and mask, because tl.arange only accepts powers of two.", 0),
]),
"linear_weight": ("linear_weight_transposed", [
 ("W from nn.Linear is stored out x in (out_features rows), so the kernel must read it transposed for x @ W.", 0),
 ("For y = x @ W^T with W = linear.weight of shape (out, in), pass stride_wk = W.stride(1) and stride_wn = W.stride(0).", 0),
]),
"dtype_call": ("dtype_called_as_cast", [
 ("Casting in Triton is a method: x.to(tl.float16); tl.float16(x) raises 'dtype' object is not callable.", 1),
 ("No function-style casts: write acc.to(tl.float32) rather than tl.float32(acc).", 0),
]),
"item_in_kernel": (None, [
 ("`.item()` has no meaning in Triton device code; the loaded value is already usable.", 0),
]),
"dot_min16": ("dot_too_small", [
 ("tl.dot requires M, N, K >= 16; 8-wide tiles are rejected on the GPU.", 1),
]),
"dot_dtype": ("dot_mixed_dtypes", [
 ("tl.dot inputs must share one dtype: a fp16 tile times a fp32 tile is rejected; cast the fp32 one.", 1),
]),
"dot_1d": ("dot_one_dimensional", [
 ("Vectors are not valid tl.dot operands (rank 1); use tl.sum(a * b, axis=0) for an inner product.", 1),
]),
"mask_missing": (None, [
 ("The last program's offsets run beyond n; guard every tl.load and tl.store with mask=offs < n.", 0),
]),
"mask_shape": ("mask_shape_mismatch", [
 ("2-D loads need a 2-D mask: mask = (rm[:, None] < M) & (rn[None, :] < N), not a 1-D row mask.", 1),
]),
"max_fill": (None, [
 ("For a masked row max, masked lanes must load as -inf (other=float('-inf')); 0.0 wins for all-negative rows.", 0),
]),
"running_max": (None, [
 ("Online softmax: m = -inf initially, not zero, or rows of negative logits break.", 0),
]),
"if_tensor": ("python_if_on_tensor", [
 ("Python `if` can't branch per element on a Triton tensor; compute both sides and pick with tl.where.", 1),
]),
"max_builtin": (None, [
 ("builtin max() isn't elementwise on Triton blocks; tl.maximum is.", 0),
]),
"program_id_axis": ("program_id_axis_three", [
 ("tl.program_id(axis=3) raises: grids only have axes 0, 1 and 2.", 1),
]),
"zeros_constexpr": ("zeros_runtime_shape", [
 ("tl.zeros shape entries must be constexpr, so the accumulator size has to be a tl.constexpr parameter.", 1),
]),
"sum_axis": ("sum_axis_out_of_range", [
 ("Reducing a 1-D tile over axis=1 fails (axis out of bounds); 1-D tiles only have axis 0.", 1),
]),
"grid_tuple": ("grid_not_a_tuple", [
 ("kernel[grid] wants grid as a tuple or a callable returning one; an int gives 'object of type int has no len()'.", 1),
]),
"helper_not_jit": ("plain_python_helper", [
 ("Functions called inside a kernel need their own @triton.jit decorator; a plain def is not visible to the compiler.", 1),
]),
"ptr_float_offset": ("float_pointer_offset", [
 ("Pointer + float offsets is a type error; keep offsets int32/int64.", 1),
]),
"reshape_numel": ("reshape_wrong_numel", [
 ("tl.reshape must preserve numel: (16,) can become (4, 4) but not (4, 8).", 1),
]),
"store_block_scalar": ("store_tensor_to_scalar_pointer_block", [
 ("tl.store of a block needs a block of pointers; to write one value, reduce first.", 1),
]),
"cast_before_exp": ("exp_of_integer_block", [
 ("tl.exp rejects int32 tensors (expects fp32/fp64): convert with .to(tl.float32) first.", 1),
]),
"host_list": ("host_tensor_arg_as_python_list", [
 ("Kernels take tensors, not Python lists; torch.tensor(lst, device=x.device) before launching.", 1),
]),
"static_range_constexpr": (None, [
 ("Only constexpr bounds are allowed in tl.static_range; a runtime loop count needs plain range().", 0),
]),
"contiguous_strides": (None, [
 ("Kernels that hard-code stride = n_cols fail on x.t(); either call .contiguous() or pass x.stride(0).", 0),
]),
"output_dtype": (None, [
 ("Match the reference output dtype: a float32 result for a half model fails the dtype check.", 0),
]),
"arange_order": ("arange_start_not_below_end", [
 ("tl.arange(start, end) needs end > start; tl.arange(BLOCK, 0) fails.", 1),
 ("Do not write tl.arange with the larger bound first; arange's end must exceed its start.", 1),
 ("arange's end argument must be greater than the start argument", 1),
 ("To count down, use BLOCK - 1 - tl.arange(0, BLOCK), not tl.arange(BLOCK, 0).", 0),
]),
"zeros_pow2": ("zeros_shape_not_power_of_two", [
 ("Shapes of tl.zeros must be powers of two too: tl.zeros((12,), ...) fails.", 1),
 ("Shape element 0 must be a power of 2: round the tl.zeros BLOCK up to a power of two.", 1),
 ("Never allocate a tl.zeros accumulator with a non power of two length.", 0),
]),
"full_constexpr": ("full_runtime_shape", [
 ("tl.full((n,), -inf, tl.float32) with a runtime n fails; its shape must be constexpr.", 1),
 ("Give tl.full a constexpr shape: tl.full([BLOCK], value, dtype) with BLOCK: tl.constexpr.", 1),
 ("Never pass a runtime argument as the shape of tl.full.", 0),
]),
"where_bool": ("where_condition_float", [
 ("The condition of tl.where must be boolean; pass x > 0, not the float tensor x itself.", 0),
 ("Do not use a float block as the tl.where condition; compare it first (x != 0).", 0),
 ("tl.where(x, a, b) with a float x is deprecated: give it a boolean mask.", 0),
]),
"item_host_sync": (None, [
 (".item() on a CUDA tensor in the Python launch loop forces a device sync every iteration; keep the scalar on the device.", 0),
 ("Avoid calling .item() on the host in the launch wrapper to read sizes from a GPU tensor: it synchronizes. Use shapes.", 0),
]),
}
errs = json.load(open("benchmarks/memory_corpus/errors.json"))["cases"]
gpu_errs = json.load(open("benchmarks/memory_corpus/errors_gpu.json"))["cases"]


def error_of(case):
    """The error the case's kernel raised: in the interpreter, else on the GPU (None: silent on both)."""
    for where, table in (("interpreter", errs), ("gpu", gpu_errs)):
        e = table.get(case) if case else None
        if e and e["error_class"] and e["error_class"] != "AssertionError":
            return {**e, "where": where}
    return None


n = 0
with open("benchmarks/memory_corpus/rules.jsonl", "w") as f:
    for part, groups in (("first", G), ("later", LATER)):
        for group, (case, rules) in groups.items():
            for text, with_err in rules:
                e = error_of(case)
                rec = {"group": group, "text": text, "set": part}
                if with_err and e:
                    rec["error_class"] = e["error_class"]
                    rec["error"] = e["message"]
                    rec["case"] = case
                    rec["where"] = e["where"]
                f.write(json.dumps(rec) + "\n")
                n += 1
print(f"{n} rules in {len(set(G) | set(LATER))} groups")
