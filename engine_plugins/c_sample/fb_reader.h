/*
 * fb_reader.h -- a tiny, bounds-checked FlatBuffers reader for the C sample engine plugin.
 *
 * Written from the FlatBuffers wire-format rules (little-endian; a buffer starts with a uoffset to
 * the root table; a table starts with an soffset to its vtable; vtable = u16 vtable size, u16 inline
 * table size, then one u16 field offset per slot, 0 = absent; vectors/strings are a u32 length
 * followed by the elements; a string is additionally NUL-terminated; a union is a ubyte type tag in
 * one slot plus a uoffset in the next slot).
 *
 * Every read is bounds checked: a malformed buffer yields FB_BAD and a message in fb_buffer.err,
 * never an out-of-bounds access. No alignment is assumed (all reads are byte-wise).
 */
#ifndef HIPDNN_CABI_C_SAMPLE_FB_READER_H
#define HIPDNN_CABI_C_SAMPLE_FB_READER_H

#include <stddef.h>
#include <stdint.h>

#define FB_OK 0
#define FB_ABSENT 1
#define FB_BAD (-1)

#define FB_ERR_LEN 256

typedef struct fb_buffer
{
    const uint8_t* data;
    size_t size;
    const char* what; /* name of the root type, used in messages */
    char err[FB_ERR_LEN];
} fb_buffer;

typedef struct fb_table
{
    fb_buffer* buf;
    size_t pos; /* absolute position of the table (its soffset) */
    size_t vtable; /* absolute position of its vtable */
    uint16_t vt_size; /* vtable size in bytes */
    uint16_t inline_size; /* inline table size in bytes */
} fb_table;

typedef struct fb_vector
{
    fb_buffer* buf;
    size_t pos; /* absolute position of element 0 */
    uint32_t len;
    size_t elem_size;
} fb_vector;

/* Bind a buffer. Fails (FB_BAD) for NULL data or a size too small to hold a root offset. */
int fb_init(fb_buffer* b, const void* data, size_t size, const char* what);

/* Root table of the buffer (no file identifier is expected). */
int fb_root(fb_buffer* b, fb_table* out);

/* Byte offset of a field inside its table, or 0 when absent. Never fails. */
uint16_t fb_field_offset(const fb_table* t, unsigned slot);

/* Inline scalar of `size` bytes (1, 2, 4 or 8), little-endian, zero/sign-extended into *out.
   FB_ABSENT leaves *out untouched. */
int fb_u64(const fb_table* t, unsigned slot, size_t size, uint64_t* out);
int fb_i64(const fb_table* t, unsigned slot, int64_t def, int64_t* out);
int fb_i8(const fb_table* t, unsigned slot, int8_t def, int8_t* out);
int fb_u8(const fb_table* t, unsigned slot, uint8_t def, uint8_t* out);
int fb_bool(const fb_table* t, unsigned slot, int def, int* out);
/* Optional float ("= null"): FB_ABSENT when not present. */
int fb_f32(const fb_table* t, unsigned slot, float* out);

/* Inline struct of `size` bytes: *p points to its first byte. */
int fb_struct(const fb_table* t, unsigned slot, size_t size, const uint8_t** p);

/* Nested table (also the table member of a union; pass the union's value slot). */
int fb_table_field(const fb_table* t, unsigned slot, fb_table* out);

/* Struct reached through a uoffset (a struct member of a union). */
int fb_struct_ref(const fb_table* t, unsigned slot, size_t size, const uint8_t** p);

/* Vector of elements of `elem_size` bytes (4 for vectors of tables). */
int fb_vector_field(const fb_table* t, unsigned slot, size_t elem_size, fb_vector* out);
int fb_vec_i64(const fb_vector* v, uint32_t i, int64_t* out);
int fb_vec_i32(const fb_vector* v, uint32_t i, int32_t* out);
int fb_vec_table(const fb_vector* v, uint32_t i, fb_table* out);

/* String: *s points at its bytes (NUL-terminated inside the buffer), *len excludes the NUL. */
int fb_string(const fb_table* t, unsigned slot, const char** s, uint32_t* len);

/* Little-endian decoding helpers (also used by the payload code). */
uint16_t fb_le16(const uint8_t* p);
uint32_t fb_le32(const uint8_t* p);
uint64_t fb_le64(const uint8_t* p);

#endif /* HIPDNN_CABI_C_SAMPLE_FB_READER_H */
