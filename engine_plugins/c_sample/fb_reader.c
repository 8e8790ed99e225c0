/* fb_reader.c -- see fb_reader.h. */
#include "fb_reader.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

uint16_t fb_le16(const uint8_t* p)
{
    return (uint16_t)((uint16_t)p[0] | (uint16_t)((uint16_t)p[1] << 8));
}

uint32_t fb_le32(const uint8_t* p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

uint64_t fb_le64(const uint8_t* p)
{
    return (uint64_t)fb_le32(p) | ((uint64_t)fb_le32(p + 4) << 32);
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static int fb_fail(fb_buffer* b, const char* fmt, ...)
{
    int n = snprintf(b->err, sizeof b->err, "malformed %s FlatBuffer (%zu bytes): ", b->what ? b->what : "",
                     b->size);
    if(n < 0 || (size_t)n >= sizeof b->err)
        n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->err + n, sizeof b->err - (size_t)n, fmt, ap);
    va_end(ap);
    return FB_BAD;
}

/* [pos, pos+len) lies inside the buffer; overflow safe. */
static int fb_in_bounds(const fb_buffer* b, size_t pos, size_t len)
{
    return pos <= b->size && len <= b->size - pos;
}

static int fb_table_at(fb_buffer* b, size_t pos, fb_table* out)
{
    if(!fb_in_bounds(b, pos, 4))
        return fb_fail(b, "table at %zu out of bounds", pos);
    int32_t soff = (int32_t)fb_le32(b->data + pos);
    int64_t vt = (int64_t)pos - (int64_t)soff;
    if(vt < 0 || !fb_in_bounds(b, (size_t)vt, 4))
        return fb_fail(b, "vtable of table at %zu (soffset %d) out of bounds", pos, (int)soff);
    uint16_t vt_size = fb_le16(b->data + (size_t)vt);
    uint16_t inline_size = fb_le16(b->data + (size_t)vt + 2);
    if(vt_size < 4 || (vt_size & 1u) != 0 || !fb_in_bounds(b, (size_t)vt, vt_size))
        return fb_fail(b, "vtable at %lld has invalid size %u", (long long)vt, (unsigned)vt_size);
    if(inline_size < 4 || !fb_in_bounds(b, pos, inline_size))
        return fb_fail(b, "table at %zu has invalid inline size %u", pos, (unsigned)inline_size);
    out->buf = b;
    out->pos = pos;
    out->vtable = (size_t)vt;
    out->vt_size = vt_size;
    out->inline_size = inline_size;
    return FB_OK;
}

int fb_init(fb_buffer* b, const void* data, size_t size, const char* what)
{
    memset(b, 0, sizeof *b);
    b->data = (const uint8_t*)data;
    b->size = size;
    b->what = what;
    if(data == NULL)
        return fb_fail(b, "NULL data");
    if(size < 8)
        return fb_fail(b, "buffer too small");
    if(size > (size_t)INT32_MAX)
        return fb_fail(b, "buffer larger than 2 GiB");
    return FB_OK;
}

int fb_root(fb_buffer* b, fb_table* out)
{
    if(b->data == NULL || !fb_in_bounds(b, 0, 4))
        return fb_fail(b, "no root offset");
    uint32_t root = fb_le32(b->data);
    if(root < 4)
        return fb_fail(b, "root offset %u points into the header", (unsigned)root);
    return fb_table_at(b, root, out);
}

uint16_t fb_field_offset(const fb_table* t, unsigned slot)
{
    size_t entry = 4 + 2 * (size_t)slot;
    if(entry + 2 > t->vt_size)
        return 0;
    return fb_le16(t->buf->data + t->vtable + entry);
}

/* Absolute position of an inline field of `size` bytes; FB_ABSENT / FB_BAD / FB_OK. */
static int fb_field_pos(const fb_table* t, unsigned slot, size_t size, size_t* pos)
{
    uint16_t off = fb_field_offset(t, slot);
    if(off == 0)
        return FB_ABSENT;
    if(off < 4 || (size_t)off + size > t->inline_size)
        return fb_fail(t->buf, "field slot %u of table at %zu: offset %u (+%zu bytes) outside inline size %u",
                       slot, t->pos, (unsigned)off, size, (unsigned)t->inline_size);
    *pos = t->pos + off;
    return FB_OK;
}

int fb_u64(const fb_table* t, unsigned slot, size_t size, uint64_t* out)
{
    size_t pos = 0;
    int rc = fb_field_pos(t, slot, size, &pos);
    if(rc != FB_OK)
        return rc;
    const uint8_t* p = t->buf->data + pos;
    switch(size)
    {
    case 1: *out = p[0]; break;
    case 2: *out = fb_le16(p); break;
    case 4: *out = fb_le32(p); break;
    case 8: *out = fb_le64(p); break;
    default: return fb_fail(t->buf, "internal: scalar size %zu", size);
    }
    return FB_OK;
}

int fb_i64(const fb_table* t, unsigned slot, int64_t def, int64_t* out)
{
    uint64_t v = 0;
    int rc = fb_u64(t, slot, 8, &v);
    if(rc == FB_BAD)
        return rc;
    *out = rc == FB_OK ? (int64_t)v : def;
    return rc;
}

int fb_i8(const fb_table* t, unsigned slot, int8_t def, int8_t* out)
{
    uint64_t v = 0;
    int rc = fb_u64(t, slot, 1, &v);
    if(rc == FB_BAD)
        return rc;
    *out = rc == FB_OK ? (int8_t)(uint8_t)v : def;
    return rc;
}

int fb_u8(const fb_table* t, unsigned slot, uint8_t def, uint8_t* out)
{
    uint64_t v = 0;
    int rc = fb_u64(t, slot, 1, &v);
    if(rc == FB_BAD)
        return rc;
    *out = rc == FB_OK ? (uint8_t)v : def;
    return rc;
}

int fb_bool(const fb_table* t, unsigned slot, int def, int* out)
{
    uint64_t v = 0;
    int rc = fb_u64(t, slot, 1, &v);
    if(rc == FB_BAD)
        return rc;
    *out = rc == FB_OK ? (v != 0) : def;
    return rc;
}

int fb_f32(const fb_table* t, unsigned slot, float* out)
{
    uint64_t v = 0;
    int rc = fb_u64(t, slot, 4, &v);
    if(rc != FB_OK)
        return rc;
    uint32_t bits = (uint32_t)v;
    memcpy(out, &bits, sizeof *out);
    return FB_OK;
}

int fb_struct(const fb_table* t, unsigned slot, size_t size, const uint8_t** p)
{
    size_t pos = 0;
    int rc = fb_field_pos(t, slot, size, &pos);
    if(rc != FB_OK)
        return rc;
    *p = t->buf->data + pos;
    return FB_OK;
}

/* Follow the uoffset stored in a field; *target = absolute position it points to. */
static int fb_deref(const fb_table* t, unsigned slot, size_t* target)
{
    size_t pos = 0;
    int rc = fb_field_pos(t, slot, 4, &pos);
    if(rc != FB_OK)
        return rc;
    uint32_t rel = fb_le32(t->buf->data + pos);
    if(rel == 0 || !fb_in_bounds(t->buf, pos, (size_t)rel) || pos + rel >= t->buf->size)
        return fb_fail(t->buf, "field slot %u of table at %zu: uoffset %u out of bounds", slot, t->pos,
                       (unsigned)rel);
    *target = pos + rel;
    return FB_OK;
}

int fb_table_field(const fb_table* t, unsigned slot, fb_table* out)
{
    size_t target = 0;
    int rc = fb_deref(t, slot, &target);
    if(rc != FB_OK)
        return rc;
    return fb_table_at(t->buf, target, out);
}

int fb_struct_ref(const fb_table* t, unsigned slot, size_t size, const uint8_t** p)
{
    size_t target = 0;
    int rc = fb_deref(t, slot, &target);
    if(rc != FB_OK)
        return rc;
    if(!fb_in_bounds(t->buf, target, size))
        return fb_fail(t->buf, "struct of %zu bytes at %zu (slot %u) out of bounds", size, target, slot);
    *p = t->buf->data + target;
    return FB_OK;
}

int fb_vector_field(const fb_table* t, unsigned slot, size_t elem_size, fb_vector* out)
{
    size_t target = 0;
    int rc = fb_deref(t, slot, &target);
    if(rc != FB_OK)
        return rc;
    if(!fb_in_bounds(t->buf, target, 4))
        return fb_fail(t->buf, "vector length at %zu (slot %u) out of bounds", target, slot);
    uint32_t len = fb_le32(t->buf->data + target);
    size_t start = target + 4;
    size_t avail = t->buf->size - start;
    if(elem_size == 0 || (size_t)len > avail / elem_size)
        return fb_fail(t->buf, "vector at %zu (slot %u): %u elements of %zu bytes exceed the buffer", target,
                       slot, (unsigned)len, elem_size);
    out->buf = t->buf;
    out->pos = start;
    out->len = len;
    out->elem_size = elem_size;
    return FB_OK;
}

static int fb_vec_check(const fb_vector* v, uint32_t i, size_t size)
{
    if(i >= v->len || v->elem_size != size)
        return fb_fail(v->buf, "internal: vector index %u of %u (element size %zu, wanted %zu)", (unsigned)i,
                       (unsigned)v->len, v->elem_size, size);
    return FB_OK;
}

int fb_vec_i64(const fb_vector* v, uint32_t i, int64_t* out)
{
    if(fb_vec_check(v, i, 8) != FB_OK)
        return FB_BAD;
    *out = (int64_t)fb_le64(v->buf->data + v->pos + 8 * (size_t)i);
    return FB_OK;
}

int fb_vec_i32(const fb_vector* v, uint32_t i, int32_t* out)
{
    if(fb_vec_check(v, i, 4) != FB_OK)
        return FB_BAD;
    *out = (int32_t)fb_le32(v->buf->data + v->pos + 4 * (size_t)i);
    return FB_OK;
}

int fb_vec_table(const fb_vector* v, uint32_t i, fb_table* out)
{
    if(fb_vec_check(v, i, 4) != FB_OK)
        return FB_BAD;
    size_t p = v->pos + 4 * (size_t)i;
    uint32_t rel = fb_le32(v->buf->data + p);
    if(rel == 0 || !fb_in_bounds(v->buf, p, (size_t)rel) || p + rel >= v->buf->size)
        return fb_fail(v->buf, "vector element %u at %zu: uoffset %u out of bounds", (unsigned)i, p, (unsigned)rel);
    return fb_table_at(v->buf, p + rel, out);
}

int fb_string(const fb_table* t, unsigned slot, const char** s, uint32_t* len)
{
    fb_vector v;
    int rc = fb_vector_field(t, slot, 1, &v);
    if(rc != FB_OK)
        return rc;
    if(!fb_in_bounds(t->buf, v.pos, (size_t)v.len + 1) || t->buf->data[v.pos + v.len] != 0)
        return fb_fail(t->buf, "string (slot %u of table at %zu) is not NUL-terminated", slot, t->pos);
    *s = (const char*)(t->buf->data + v.pos);
    *len = v.len;
    return FB_OK;
}
