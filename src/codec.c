#include "codec.h"

const codec_vtable *codec_get(mts_codec id)
{
    switch (id) {
    case MTS_CODEC_NONE: return &codec_none_vtable;
    case MTS_CODEC_LZ4: return &codec_lz4_vtable;
    case MTS_CODEC_ZSTD: return &codec_zstd_vtable;
    }
    return NULL;
}
