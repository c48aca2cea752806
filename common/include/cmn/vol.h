/* The volume sample header: how a 3-D sample (3D-UNet's KiTS19 cases) carries its shape on the
 * wire. Cases have different shapes, and the wire's Sample metadata carries only sizes, so each
 * such sample starts with this fixed 32-byte header, followed by the voxels:
 *
 *   offset  size  field
 *        0     4  magic "NVOL"
 *        4     4  version (1), u32 little-endian
 *        8     4  dtype: 1 float32 (little-endian IEEE 754); 2 uint8
 *       12     4  channels (>= 1)
 *       16    12  depth, height, width (each >= 1), u32 little-endian
 *       28     4  reserved, 0
 *       32     -  channels x depth x height x width elements, C order (width fastest)
 *
 * loadgen-node's KiTS19 QSL (--qsl-kits) writes it in front of each pre-processed case; sut-node's
 * sliding window reads it. The header is what the QSL's pre-processing produces, so it is
 * compressed with the sample; the node validates it as hostile input (sizes before allocation).
 * Segmentations travel back without a header: raw uint8 voxels, as the reference's accuracy
 * script expects them in the accuracy log. Pure functions, reentrant. */
#ifndef CMN_VOL_H
#define CMN_VOL_H

#include "cmn/err.h"

#include <stddef.h>
#include <stdint.h>

#define CMN_VOL_HEADER_SIZE 32u
#define CMN_VOL_VERSION 1u

enum { CMN_VOL_F32 = 1, CMN_VOL_U8 = 2 };

typedef struct {
    uint32_t dtype;    /* CMN_VOL_F32 or CMN_VOL_U8 */
    uint32_t channels; /* >= 1 */
    uint32_t dims[3];  /* depth, height, width; each >= 1 */
} cmn_vol_t;

/* Bytes per element of |dtype|, or 0 for an unknown dtype. */
size_t cmn_vol_itemsize(uint32_t dtype);

/* Elements (channels x voxels) of |v|, or 0 when a field is 0 or the count overflows 64 bits. */
uint64_t cmn_vol_elements(const cmn_vol_t *v);

/* Writes the 32-byte header of |v|. Returns 0, or CMN_EFIELD for an unknown dtype or a 0 size. */
int cmn_vol_encode(const cmn_vol_t *v, uint8_t out[CMN_VOL_HEADER_SIZE]);

/* Parses the header at the start of the |n|-byte sample |p| and checks that the voxels fill the
 * rest exactly. Returns 0, or CMN_EFORMAT with the defect (magic, version, dtype, a size, the
 * byte count) in |eb|. */
int cmn_vol_decode(const void *p, size_t n, cmn_vol_t *out, cmn_errbuf_t *eb);

#endif
