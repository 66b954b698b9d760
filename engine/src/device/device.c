/* device.c: the public device calls: binding host stream data by name to a
 * package's streams, dispatching to the device implementation, and turning a
 * fault into JSON (kind, tile, address range, program step and phase, the
 * compiler op, kernel or row, and the allocations involved).
 */
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "kernels/kernels.h"

typedef struct pending_stream {
    char *name;
    uint8_t *data;
    size_t size;
} pending_stream;

struct ipu_device {
    const ipu_device_iface *iface;
    void *impl;
    ipu_profile profile;
    uint64_t profile_digest; /* what a package built for this device carries */
    const ipu_package *pkg; /* borrowed: the caller keeps it alive */
    ipu_host_buffer *buffers;
    size_t buffer_count;
    pending_stream *pending;
    size_t pending_count, pending_capacity;
    int faulted;
    json_t *fault_profile; /* the cycle report of the run a fault stopped, up to the fault */
};

static const char *FAULT_NAMES[IPU_FAULT_KIND_COUNT] = {
    "none",
    "uninitialized_read",
    "protected_write",
    "out_of_bounds",
    "misaligned",
    "element_conflict",
    "exchange_unmatched_receive",
    "exchange_window_mismatch",
    "exchange_port_conflict",
    "exchange_conflicting_writers",
    "exchange_read_write_conflict",
    "missing_kernel",
    "malformed_descriptor",
    "operand_outside_allocation",
    "stale_read",
    "exchange_base_not_restored",
};

const ipu_package *ipu_device_package(const ipu_device *dev) { return dev->pkg; }

const ipu_memory_events *ipu_device_memory_events(const ipu_device *dev)
{
    return dev->pkg ? dev->iface->memory_events(dev->impl) : NULL;
}

const char *ipu_fault_kind_name(int kind)
{
    return kind >= 0 && kind < IPU_FAULT_KIND_COUNT ? FAULT_NAMES[kind] : "unknown";
}

ipu_status ipu_device_create(ipu_ctx *ctx, const char *profile_json, ipu_device **out)
{
    if (!profile_json || !out)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_device_create: NULL argument");
    ipu_device *dev = ipu_calloc(ctx, 1, sizeof *dev);
    if (!dev)
        return IPU_NO_MEMORY(ctx);
    ipu_status status = ipu_profile_parse(ctx, profile_json, 0, &dev->profile);
    if (status == IPU_OK && !(dev->profile_digest = ipu_profile_digest(&dev->profile)))
        status = IPU_NO_MEMORY(ctx); /* 0: its JSON could not be made (a real digest is 0 at odds of 2^-64) */
    if (status == IPU_OK)
        status = ipu_sim_create(ctx, &dev->profile, &dev->iface, &dev->impl);
    if (status != IPU_OK) {
        free(dev);
        return status;
    }
    *out = dev;
    return IPU_OK;
}

static void free_buffers(ipu_device *dev)
{
    for (size_t i = 0; dev->buffers && i < dev->buffer_count; i++)
        free(dev->buffers[i].data);
    free(dev->buffers);
    dev->buffers = NULL;
    dev->buffer_count = 0;
}

static void free_pending(ipu_device *dev)
{
    for (size_t i = 0; i < dev->pending_count; i++) {
        free(dev->pending[i].name);
        free(dev->pending[i].data);
    }
    dev->pending_count = 0;
}

void ipu_device_free(ipu_device *dev)
{
    if (!dev)
        return;
    free_buffers(dev);
    free_pending(dev);
    free(dev->pending);
    json_decref(dev->fault_profile);
    if (dev->iface)
        dev->iface->destroy(dev->impl);
    free(dev);
}

void ipu_device_unload(ipu_device *dev)
{
    if (!dev)
        return;
    free_buffers(dev);
    free_pending(dev);
    dev->iface->unload(dev->impl);
    dev->pkg = NULL;
    dev->faulted = 0;
    json_decref(dev->fault_profile);
    dev->fault_profile = NULL;
}

/* The loaded package's stream that takes size bytes from the host, by name. */
static ipu_status host_stream(ipu_ctx *ctx, const ipu_device *dev, const char *name, size_t size, int *index)
{
    *index = ipu_pkg_find_stream(dev->pkg, name);
    if (*index < 0)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "the package has no stream named '%s'", name);
    const ipu_pkg_stream *s = &dev->pkg->streams[*index];
    if (s->direction == IPU_STREAM_OUTPUT)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "stream '%s' is an output; the host cannot supply it", name);
    if (s->size != size)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "stream '%s' got %zu bytes, the package expects %llu", name,
                        size, (unsigned long long)s->size);
    return IPU_OK;
}

/* Move data into the buffer of the named package stream. */
static ipu_status bind(ipu_ctx *ctx, ipu_device *dev, const char *name, uint8_t *data, size_t size)
{
    int index;
    ipu_status status = host_stream(ctx, dev, name, size, &index);
    if (status != IPU_OK) {
        free(data);
        return status;
    }
    free(dev->buffers[index].data);
    dev->buffers[index] = (ipu_host_buffer){data, size, 1};
    return IPU_OK;
}

ipu_status ipu_device_set_stream(ipu_ctx *ctx, ipu_device *dev, const char *stream,
                                 const void *data, size_t size)
{
    if (!dev || !stream || (!data && size))
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_device_set_stream: NULL argument");
    uint8_t *copy = ipu_malloc(ctx, size ? size : 1);
    if (!copy)
        return IPU_NO_MEMORY(ctx);
    if (size)
        memcpy(copy, data, size);
    /* With a package loaded, an input binds now (a run consumes it); a
     * parameter waits for the next initialize, the only step that reads it,
     * which binds the package's streams again. */
    if (dev->pkg) {
        int index;
        ipu_status status = host_stream(ctx, dev, stream, size, &index);
        if (status != IPU_OK) {
            free(copy);
            return status;
        }
        if (dev->pkg->streams[index].direction != IPU_STREAM_PARAM)
            return bind(ctx, dev, stream, copy, size);
    }
    ipu_status status = IPU_GROW(ctx, dev->pending, dev->pending_count, dev->pending_capacity);
    char *name = status == IPU_OK ? ipu_strdup(ctx, stream) : NULL;
    if (!name) {
        free(copy), free(name);
        return IPU_NO_MEMORY(ctx);
    }
    dev->pending[dev->pending_count++] = (pending_stream){name, copy, size};
    return IPU_OK;
}

void ipu_device_observe(ipu_device *dev, ipu_phase_observer observer, void *user)
{
    dev->iface->set_observer(dev->impl, observer, user);
}

ipu_status ipu_device_configure(ipu_ctx *ctx, ipu_device *dev, const char *options_json)
{
    if (!dev || !options_json)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_device_configure: NULL argument");
    json_error_t error;
    json_t *o = json_loads(options_json, JSON_REJECT_DUPLICATES, &error);
    if (!json_is_object(o)) {
        json_decref(o);
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "device options: expected a JSON object%s%s",
                        o ? "" : ": ", o ? "" : error.text);
    }
    ipu_status status = IPU_OK;
    const char *key;
    json_t *value;
    /* A test's mutation of the device itself (the catalogue lists it, stage "device"). */
    const char *inject = json_string_value(json_object_get(o, "inject"));
    int mutation = inject && strcmp(inject, "memory-events-late") == 0;
    if (json_object_get(o, "inject") && (!mutation || !json_is_true(json_object_get(o, "memory_events"))))
        status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                          "device options: 'inject' takes a device mutation (memory-events-late) and needs "
                          "memory_events true");
    json_t *traced = json_object_get(o, "traced_tiles");
    if (traced && status == IPU_OK) {
        uint32_t tiles[IPU_MAX_TRACED_TILES];
        size_t count = json_array_size(traced);
        int bad = !json_is_array(traced) || count > IPU_MAX_TRACED_TILES;
        for (size_t i = 0; i < count && !bad; i++) {
            json_int_t tile = json_integer_value(json_array_get(traced, i));
            bad = !json_is_integer(json_array_get(traced, i)) || tile < 0 || tile >= (json_int_t)dev->profile.tiles;
            tiles[i] = (uint32_t)tile;
        }
        if (bad)
            status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                              "device options: 'traced_tiles' must list at most %d of the device's %u tiles",
                              IPU_MAX_TRACED_TILES, dev->profile.tiles);
        else
            dev->iface->set_traced_tiles(dev->impl, tiles, count);
    }
    json_object_foreach(o, key, value) {
        if (status != IPU_OK || strcmp(key, "inject") == 0 || strcmp(key, "traced_tiles") == 0)
            continue;
        int checks = strcmp(key, "allocation_checks") == 0, events = strcmp(key, "memory_events") == 0;
        if (!checks && !events) {
            status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                              "device options: unknown option '%s' (expected allocation_checks, memory_events, "
                              "traced_tiles or inject)",
                              key);
            break;
        }
        if (!json_is_boolean(value)) {
            status = IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "device options: '%s' must be true or false", key);
            break;
        }
        if (checks)
            dev->iface->set_allocation_checks(dev->impl, json_is_true(value));
        else
            dev->iface->set_memory_events(dev->impl, !json_is_true(value) ? IPU_EVENTS_OFF
                                                     : mutation            ? IPU_EVENTS_BEGIN_LATE
                                                                           : IPU_EVENTS_ON);
    }
    json_decref(o);
    return status;
}

ipu_status ipu_device_initialize(ipu_ctx *ctx, ipu_device *dev, const ipu_package *pkg)
{
    if (!dev || !pkg)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_device_initialize: NULL argument");
    if (pkg->profile_digest != dev->profile_digest)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT,
                        "the package was built for device profile '%s' (%u tiles), this device is "
                        "'%s' (%u tiles)",
                        pkg->profile.name, pkg->profile.tiles, dev->profile.name, dev->profile.tiles);
    free_buffers(dev);
    dev->pkg = pkg;
    dev->faulted = 0;
    json_decref(dev->fault_profile);
    dev->fault_profile = NULL;
    dev->buffers = ipu_calloc(ctx, pkg->stream_count ? pkg->stream_count : 1, sizeof *dev->buffers);
    if (!dev->buffers) {
        dev->pkg = NULL;
        return IPU_NO_MEMORY(ctx);
    }
    dev->buffer_count = pkg->stream_count;
    ipu_status status = IPU_OK;
    for (size_t i = 0; i < dev->pending_count && status == IPU_OK; i++) {
        status = bind(ctx, dev, dev->pending[i].name, dev->pending[i].data, dev->pending[i].size);
        dev->pending[i].data = NULL;
    }
    free_pending(dev);
    if (status == IPU_OK)
        status = dev->iface->initialize(dev->impl, ctx, pkg, dev->buffers);
    if (status == IPU_ERR_DEVICE_FAULT)
        dev->faulted = 1;
    if (status != IPU_OK && status != IPU_ERR_DEVICE_FAULT) {
        free_buffers(dev);
        dev->pkg = NULL;
    }
    return status;
}

ipu_status ipu_device_run(ipu_ctx *ctx, ipu_device *dev, char **out_json)
{
    if (!dev || !out_json)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_device_run: NULL argument");
    if (!dev->pkg || dev->faulted)
        return IPU_FAIL(ctx, IPU_ERR_STATE, dev->faulted ? "the device stopped on a fault; "
                                                           "initialize it again"
                                                         : "run before initialize");
    json_t *result = NULL;
    ipu_status status = dev->iface->run(dev->impl, ctx, dev->buffers, &result);
    if (status == IPU_ERR_DEVICE_FAULT) {
        dev->faulted = 1;
        dev->fault_profile = result;
        return status;
    }
    if (status != IPU_OK) {
        json_decref(result);
        return status;
    }
    char *text = json_dumps(result, JSON_COMPACT);
    json_decref(result);
    if (!text)
        return IPU_NO_MEMORY(ctx);
    *out_json = text;
    return IPU_OK;
}

ipu_status ipu_device_fault_profile_json(ipu_ctx *ctx, const ipu_device *dev, char **out_json)
{
    if (!dev || !out_json)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_device_fault_profile_json: NULL argument");
    if (!dev->fault_profile)
        return IPU_FAIL(ctx, IPU_ERR_STATE, "no run stopped on a fault since the last initialize");
    *out_json = json_dumps(dev->fault_profile, JSON_COMPACT);
    return *out_json ? IPU_OK : IPU_NO_MEMORY(ctx);
}

ipu_status ipu_device_stream(ipu_ctx *ctx, ipu_device *dev, const char *stream,
                             const void **out_data, size_t *out_size)
{
    if (!dev || !stream || !out_data || !out_size)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_device_stream: NULL argument");
    int index = dev->pkg ? ipu_pkg_find_stream(dev->pkg, stream) : -1;
    if (index < 0)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "the package has no stream named '%s'",
                        stream);
    if (!dev->buffers[index].present)
        return IPU_FAIL(ctx, IPU_ERR_STATE, "stream '%s' holds no data yet", stream);
    *out_data = dev->buffers[index].data;
    *out_size = dev->buffers[index].size;
    return IPU_OK;
}

/* A compiler op as JSON ({index, kind, name, label}), null when none. */
static json_t *compiler_op_json(const ipu_package *pkg, uint32_t op)
{
    if (!pkg || op == IPU_NO_OP || op >= pkg->compiler_op_count)
        return json_null();
    char label[160];
    ipu_pkg_compiler_op_label(pkg, op, label, sizeof label);
    const ipu_pkg_compiler_op *c = &pkg->compiler_ops[op];
    return json_pack("{s:I, s:s, s:s, s:s}", "index", (json_int_t)op, "kind",
                     ipu_pkg_string(pkg, c->kind_offset), "name", ipu_pkg_string(pkg, c->name_offset),
                     "label", label);
}

/* An allocation as JSON: name, owner tensor, shape, compiler op, tile, range
 * and lifetime in phases (last null: forever); null when none. */
static json_t *allocation_json(const ipu_package *pkg, int64_t index)
{
    if (!pkg || index < 0 || (size_t)index >= pkg->alloc_count)
        return json_null();
    const ipu_pkg_alloc *a = &pkg->allocs[index];
    return json_pack("{s:I, s:s, s:s, s:s, s:o, s:I, s:I, s:I, s:I, s:o}", "index", (json_int_t)index,
                     "name", ipu_pkg_string(pkg, a->name_offset), "tensor",
                     ipu_pkg_string(pkg, a->tensor_offset), "shape", ipu_pkg_string(pkg, a->shape_offset),
                     "op", compiler_op_json(pkg, a->op),
                     "tile", (json_int_t)a->tile, "address", (json_int_t)a->address, "size",
                     (json_int_t)a->size, "first_phase", (json_int_t)a->first, "last_phase",
                     a->last == IPU_LIFE_FOREVER ? json_null() : json_integer(a->last));
}

ipu_status ipu_device_fault_json(ipu_ctx *ctx, const ipu_device *dev, char **out_json)
{
    if (!dev || !out_json)
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_device_fault_json: NULL argument");
    /* An unloaded device holds no fault: the package it names is gone. */
    static const ipu_fault none = {.kind = IPU_FAULT_NONE};
    const ipu_fault *f = dev->pkg ? dev->iface->fault(dev->impl) : &none;
    json_t *o = json_object();
    int bad = !o; /* a field jansson could not add */
    bad |= json_object_set_new(o, "kind", json_string(ipu_fault_kind_name(f->kind)));
    if (f->kind != IPU_FAULT_NONE) {
        bad |= json_object_set_new(o, "tile", json_integer(f->tile));
        bad |= json_object_set_new(o, "address_lo", json_integer(f->address_lo));
        bad |= json_object_set_new(o, "address_hi", json_integer(f->address_hi));
        bad |= json_object_set_new(o, "program", json_string(f->program ? f->program : ""));
        bad |= json_object_set_new(o, "op_index", json_integer(f->op_index));
        bad |= json_object_set_new(o, "step", json_integer((json_int_t)f->step));
        bad |= json_object_set_new(o, "kernel", f->entry > 0 && ipu_kernel_name(f->entry)
                                                    ? json_string(ipu_kernel_name(f->entry))
                                                    : json_null());
        bad |= json_object_set_new(o, "descriptor",
                                   f->descriptor >= 0 ? json_integer(f->descriptor) : json_null());
        bad |= json_object_set_new(o, "row", f->row >= 0 ? json_integer(f->row) : json_null());
        bad |= json_object_set_new(o, "detail", json_string(f->detail));
        bad |= json_object_set_new(o, "phase", json_integer(f->phase));
        bad |= json_object_set_new(o, "iteration",
                                   f->iteration == IPU_NO_ITERATION ? json_null() : json_integer(f->iteration));
        bad |= json_object_set_new(o, "op", compiler_op_json(dev->pkg, f->origin));
        bad |= json_object_set_new(o, "allocation", allocation_json(dev->pkg, f->alloc));
        bad |= json_object_set_new(o, "nearest_allocation", allocation_json(dev->pkg, f->nearest));
        bad |= json_object_set_new(o, "other_allocation", allocation_json(dev->pkg, f->other));
    }
    if (bad) {
        json_decref(o);
        return IPU_NO_MEMORY(ctx);
    }
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!text)
        return IPU_NO_MEMORY(ctx);
    *out_json = text;
    return IPU_OK;
}

ipu_status ipu_device_read(ipu_ctx *ctx, const ipu_device *dev, uint32_t tile, uint32_t address,
                           void *buffer, size_t size)
{
    if (!dev || (!buffer && size))
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_device_read: NULL argument");
    return dev->iface->read(dev->impl, ctx, tile, address, buffer, size);
}

ipu_status ipu_device_write(ipu_ctx *ctx, ipu_device *dev, uint32_t tile, uint32_t address,
                            const void *buffer, size_t size)
{
    if (!dev || (!buffer && size))
        return IPU_FAIL(ctx, IPU_ERR_INVALID_ARGUMENT, "ipu_device_write: NULL argument");
    return dev->iface->write(dev->impl, ctx, tile, address, buffer, size);
}
