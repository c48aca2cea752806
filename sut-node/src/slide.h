/* The sliding window of 3D-UNet (KiTS19), as the reference SUT runs it (base_SUT.py and
 * inference_utils.py of vision/medical_imaging/3d-unet-kits19): a layer between the node and any
 * backend whose samples are [1, P, P, P] float32 patches and whose results are [3, P, P, P]
 * float32 logits (the UNet3D of MLCommons training, exported to ONNX, or unet-sim).
 *
 * A sample is a whole pre-processed case: the volume header of cmn/vol.h (float32, 1 channel,
 * D x H x W, each >= P) and its voxels. The layer cuts P^3 patches at strides of P/2 (overlap
 * 0.5), in the reference's order; runs them through the backend in batches of --window-batch
 * patches, filled from every case of the node's batch in turn (so in Offline a backend batch
 * holds patches of several cases); adds each patch's logits times the Gaussian importance map
 * (scipy.signal.gaussian(P, 0.125 P), its 3-D outer product, cube root, divided by its maximum)
 * into the case's [3, D, H, W] sums; and answers each case, as soon as its last patch is in, with
 * the argmax over the three channels: D x H x W uint8 labels (0 background, 1 kidney, 2 tumour)
 * with no header, which is what the reference's accuracy_kits.py reads from the accuracy log.
 *
 * The reference divides the sums by the summed weights before the argmax; dividing every channel
 * of a voxel by the same positive number does not change which is largest, so the layer skips
 * the division (and the weight map). A voxel no patch covers (a side that is not P/2 times an
 * integer past P) keeps sums of 0 and gets label 0, as the reference's NaN does under np.argmax.
 *
 * Each patch's logits are weighted and added as the backend completes it, on the completing
 * thread, four lanes at a time, in patch order (the reference's: the sums do not depend on the
 * order the backend completes in); no copy of them is kept but of a patch that arrives before an
 * earlier one of its backend call. The argmax is branch-free.
 *
 * Memory per case while it runs: 3 x 4 bytes per voxel (the sums: three times the float32
 * sample the budget admitted; charged to the node's memory budget, sut__slide_budget), its
 * labels, plus one batch of patches in. Thread-safety: infer() runs on a node worker and returns
 * when its cases are completed; several workers run it at once when the backend has several
 * engines (--workers). No cancel: a case runs to its end.
 */
#ifndef SUT_SLIDE_H
#define SUT_SLIDE_H

#include "budget.h"
#include "cmn/err.h"
#include "types.h"

/* Puts the layer over the backend loaded in |n| (sut__backend_load), which it then owns: the
 * layer's destroy() destroys it. |patch| is P (even, >= 2; 128 in the reference); |batch| is the
 * patches per backend call (0: the backend's preferred batch). Returns 0, or a negative code with
 * a reason in |eb| (then |n| is unchanged). */
int sut__slide_wrap(sut_be_t *n, uint32_t patch, uint32_t batch, cmn_errbuf_t *eb);

/* Charges the sums of the window over |n| (a no-op for any other backend) to |budget|, the
 * node's memory budget (budget.h), from the next case on. A case's sums (12 bytes per voxel) are
 * taken from what peers may hold (the limit); when it cannot hold them, a worker that runs other
 * cases runs those first, one that runs none waits for other workers' cases to give theirs back,
 * and with none running the node's own quarter takes them while the whole budget holds them
 * (only that case can make progress: its sample was admitted). A case whose sums are more than
 * the limit, or that has waited 1 s with nothing of the window to give back, fails with a reason
 * naming its size and the budget. */
void sut__slide_budget(sut_be_t *n, sut_budget_t *budget);

/* The Gaussian importance map of the reference, P^3 floats into |out| (for tests). */
void sut__slide_gaussian(uint32_t patch, float *out);

#endif
