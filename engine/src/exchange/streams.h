/* streams.h: the compact scheduling orders (streams.c).  A tile's receive
 * stream is its destinations sorted by key (address order), started at its
 * first window from a tile above its own and wrapped around; a transfer
 * placed on a stream never goes before the stream's last receive, so the
 * tile receives in address order and its table rows become continuations.
 */
#ifndef IPU_EXCHANGE_STREAMS_H
#define IPU_EXCHANGE_STREAMS_H

#include "exchange/ports.h"

/* Stream waves: transfers taken by their position in their receive stream,
 * N words a wave (the wave first, then the longer stream, then the tile,
 * then the position), each placed at the earliest fit after its
 * destinations' last receives.  The ports start empty. */
ipu_status ipu_xstreams_waves(ipu_ctx *ctx, const ipu_profile *p, ipu_xphase *phase, ipu_xports *q,
                              uint32_t words);

/* Endpoint-balanced chunks of chunk_words: each stream is cut into chunks
 * in address order; the next chunk is the one whose receiver and first
 * sender are free earliest (then the stream with more words left, then the
 * tile), its transfers placed in order as for waves. */
ipu_status ipu_xstreams_balanced(ipu_ctx *ctx, const ipu_profile *p, ipu_xphase *phase, ipu_xports *q,
                                 uint32_t chunk_words);

#endif
