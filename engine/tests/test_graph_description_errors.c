/* test_graph_description_errors.c: reading graph descriptions through the
 * public workload call ({"workload": "graph", "graph": ...}).  A valid
 * description using every op kind, a Repeat, FP8 and both ways of making
 * values is edited one field at a time into malformed ones (wrong types,
 * missing and unknown fields, out-of-range integers, unknown op kinds and
 * dtypes, dangling tensor names, duplicate names, bad repeat blocks, graphs
 * the validator refuses): each fails with IPU_ERR_INVALID_ARGUMENT, no
 * workload, and a message naming the offending tensor, op and field.
 * Valid but unusual descriptions are accepted: the description reads back
 * as written, names at their length limits survive, a graph without a
 * Repeat works and tensors listed out of order come back in canonical order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "ipu/ipu.h"
#include "support_seed.h"
#include "workloads/workload.h"

/* Written with ' for " (quote() swaps them); tensors in canonical order, so
 * the library's own description of the workload equals this text. */
#define NORMAL(s, o, k) "'values':{'normal':{'scale':" s ",'offset':" o ",'stream':" k "}}"
#define GIVEN "'values':'given'"
#define TENSOR(n, r, c, dt, sc, role, seq, tail) \
    "{'name':'" n "','rows':" r ",'cols':" c ",'dtype':'" dt "','scale':" sc ",'role':'" role "','sequence':" seq tail "},"
#define HEADS ",'heads':2,'head_dim':4,'seq':2"
static const char BASE[] =
    "{'format':'ipu-e2e-graph','version':1,'name':'desc-test','seed':42,'options':{'tag':'t','n':3},"
    "'tensors':["
    TENSOR("x", "4", "8", "f16", "0", "input", "1", "," NORMAL("1.0", "0.0", "3"))
    TENSOR("c", "4", "8", "f16", "0", "activation", "1", "")
    TENSOR("w", "8", "8", "f16", "0", "parameter", "2", "," GIVEN)
    TENSOR("n", "4", "8", "f16", "0", "activation", "1", "")
    TENSOR("g", "4", "8", "f16", "0", "activation", "1", "")
    TENSOR("gamma", "1", "8", "f16", "0", "parameter", "1", "," NORMAL("0.5", "1.0", "5"))
    TENSOR("beta", "1", "8", "f16", "0", "parameter", "1", "," GIVEN)
    TENSOR("l", "4", "8", "f16", "0", "activation", "1", "")
    TENSOR("bias", "1", "8", "f16", "0", "parameter", "1", "," GIVEN)
    TENSOR("s", "4", "8", "f16", "0", "activation", "1", "")
    TENSOR("w2", "8", "24", "f16", "0", "parameter", "1", "," NORMAL("0.25", "0.0", "10"))
    TENSOR("b2", "1", "24", "f16", "0", "parameter", "1", "," GIVEN)
    TENSOR("m", "4", "24", "f16", "0", "activation", "1", "")
    TENSOR("att", "4", "8", "f16", "0", "activation", "1", "")
    TENSOR("q", "1", "8", "f16", "0", "parameter", "1", "," GIVEN)
    TENSOR("kv", "4", "16", "f16", "0", "parameter", "1", "," GIVEN)
    TENSOR("p", "2", "8", "f16", "0", "activation", "1", "")
    TENSOR("y", "4", "8", "f32", "0", "output", "1", "")
    "{'name':'y8','rows':2,'cols':8,'dtype':'f143','scale':-3,'role':'output','sequence':1}],"
    "'ops':["
    "{'op':'matmul','inputs':['c','w'],'output':'n'},"
    "{'op':'gelu','inputs':['n'],'output':'g','form':'erf'},"
    "{'op':'layernorm','inputs':['g','gamma','beta'],'output':'l','epsilon':0.5},"
    "{'op':'add','inputs':['l','bias'],'output':'s'},"
    "{'op':'matmul','inputs':['s','w2','b2'],'output':'m'},"
    "{'op':'attention','inputs':['m'],'output':'att'" HEADS "},"
    "{'op':'map_pool','inputs':['q','kv'],'output':'p'" HEADS "},"
    "{'op':'cast','inputs':['att'],'output':'y'},"
    "{'op':'cast','inputs':['p'],'output':'y8'}],"
    "'repeat':{'first_op':0,'op_count':1,'iterations':2,'carried':'c','carried_next':'n','carried_init':'x'}}";

/* No Repeat; tensors listed out of canonical order (a, b, o). */
static const char SMALL[] =
    "{'format':'ipu-e2e-graph','version':1,'name':'small','seed':7,'options':{},'tensors':["
    TENSOR("o", "2", "4", "f32", "0", "output", "1", "")
    TENSOR("b", "4", "4", "f16", "0", "parameter", "1", "," NORMAL("0.5", "0.0", "1"))
    "{'name':'a','rows':2,'cols':4,'dtype':'f16','scale':0,'role':'input','sequence':1," GIVEN "}],"
    "'ops':[{'op':'matmul','inputs':['a','b'],'output':'o'}],'repeat':null}";

#define N31 "abcdefghijklmnopqrstuvwxyz01234"
#define N32 N31 "5"
#define N63 N32 N31

static json_t *parse(const char *text)
{
    char *s = strdup(text);
    assert_non_null(s);
    for (char *p = s; *p; p++)
        if (*p == '\'')
            *p = '"';
    json_error_t error;
    json_t *v = json_loads(s, JSON_DECODE_ANY, &error);
    if (!v)
        TSEED_FAIL("test JSON does not parse: %s in %s", error.text, s);
    free(s);
    return v;
}

/* Set (json non-NULL) or delete the value at a '/'-separated path ("" is
 * the whole document, "-" appends to an array); returns the document. */
static json_t *edit(json_t *doc, const char *path, const char *json)
{
    if (!*path) {
        json_decref(doc);
        return parse(json);
    }
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *at = doc;
    char *key = buf, *slash;
    while ((slash = strchr(key, '/'))) {
        *slash = 0;
        at = json_is_array(at) ? json_array_get(at, strtoul(key, NULL, 10)) : json_object_get(at, key);
        assert_non_null(at);
        key = slash + 1;
    }
    int rc;
    if (json_is_array(at))
        rc = !json ? json_array_remove(at, strtoul(key, NULL, 10))
             : strcmp(key, "-") == 0 ? json_array_append_new(at, parse(json))
                                     : json_array_set_new(at, strtoul(key, NULL, 10), parse(json));
    else
        rc = json ? json_object_set_new(at, key, parse(json)) : json_object_del(at, key);
    if (rc)
        TSEED_FAIL("test edit %s failed", path);
    return doc;
}

/* ipu_workload_create on {"workload": "graph", "graph": doc}; takes doc. */
static ipu_status create(ipu_ctx *ctx, json_t *doc, ipu_workload **w)
{
    json_t *o = json_pack("{s:s, s:o}", "workload", "graph", "graph", doc);
    assert_non_null(o);
    char *text = json_dumps(o, JSON_COMPACT);
    assert_non_null(text);
    json_decref(o);
    ipu_status status = ipu_workload_create(ctx, text, w);
    free(text);
    return status;
}

static json_t *info(ipu_ctx *ctx, const ipu_workload *w)
{
    char *text = NULL;
    TSEED_OK(ctx, ipu_workload_info_json(ctx, w, &text));
    json_t *v = json_loads(text, 0, NULL);
    assert_non_null(v);
    ipu_free(text);
    return v;
}

typedef struct change {
    const char *path, *json; /* json NULL: delete */
} change;

typedef struct bad_case {
    change changes[2];
    const char *expect[2]; /* substrings of the message */
} bad_case;

#define MUST "must be an integer in "
static const bad_case BAD[] = {
    {{{"", "[]"}}, {"graph description: expected a JSON object"}},
    {{{"comment", "'x'"}}, {"the document: unknown field 'comment'", "(expected format, version"}},
    {{{"format", NULL}}, {"the document: missing field 'format' (a string)"}},
    {{{"format", "1"}}, {"the document: expected a string for field 'format'"}},
    {{{"format", "'ipu-e2e-graf'"}}, {"field 'format' must be \"ipu-e2e-graph\", not 'ipu-e2e-graf'"}},
    {{{"version", "2"}}, {"the document: field 'version' " MUST "1..1"}},
    {{{"version", "'1'"}}, {"the document: field 'version' " MUST "1..1"}},
    {{{"name", NULL}}, {"the document: missing field 'name'"}},
    {{{"name", "''"}}, {"field 'name' must have 1 to 31 characters"}},
    {{{"name", "'" N32 "'"}}, {"field 'name' must have 1 to 31 characters"}},
    {{{"seed", "-1"}}, {"the document: field 'seed' " MUST "0..9223372036854775807"}},
    {{{"seed", "1.5"}}, {"the document: field 'seed' " MUST "0..9223372036854775807"}},
    {{{"seed", NULL}}, {"the document: missing field 'seed' (an integer in 0..9223372036854775807)"}},
    {{{"options", "[]"}}, {"field 'options' must be an object"}},
    {{{"options", NULL}}, {"field 'options' must be an object"}},
    {{{"tensors", NULL}}, {"fields 'tensors' and 'ops' must be non-empty arrays"}},
    {{{"ops", "{}"}}, {"fields 'tensors' and 'ops' must be non-empty arrays"}},
    {{{"tensors", "[]"}}, {"fields 'tensors' and 'ops' must be non-empty arrays"}},
    {{{"tensors", "{}"}}, {"fields 'tensors' and 'ops' must be non-empty arrays"}},
    {{{"ops", "[]"}}, {"fields 'tensors' and 'ops' must be non-empty arrays"}},
    {{{"ops", NULL}}, {"fields 'tensors' and 'ops' must be non-empty arrays"}},
    {{{"repeat", NULL}}, {"missing field 'repeat' (null when the graph has none)"}},
    /* tensors */
    {{{"tensors/1", "5"}}, {"tensors[1]: expected an object"}},
    {{{"tensors/0/name", NULL}}, {"tensors[0]: missing field 'name' (a string)"}},
    {{{"tensors/0/name", "7"}}, {"tensors[0]: expected a string for field 'name'"}},
    {{{"tensors/0/name", "''"}}, {"tensors[0]: field 'name' must have 1 to 63 characters"}},
    {{{"tensors/0/name", "'" N63 "x'"}}, {"tensors[0]: field 'name' must have 1 to 63 characters"}},
    {{{"tensors/0/shape", "[4,8]"}}, {"tensors[0] ('x'): unknown field 'shape' (expected name, rows"}},
    {{{"tensors/0/rows", NULL}}, {"tensors[0] ('x'): missing field 'rows' (an integer in 1..16777216)"}},
    {{{"tensors/0/rows", "0"}}, {"tensors[0] ('x'): field 'rows' " MUST "1..16777216"}},
    {{{"tensors/0/rows", "16777217"}}, {"tensors[0] ('x'): field 'rows' " MUST "1..16777216"}},
    {{{"tensors/0/rows", "'4'"}}, {"tensors[0] ('x'): field 'rows' " MUST "1..16777216"}},
    {{{"tensors/0/rows", "-4"}}, {"tensors[0] ('x'): field 'rows' " MUST "1..16777216"}},
    {{{"tensors/3/cols", "8.0"}}, {"tensors[3] ('n'): field 'cols' " MUST "1..16777216"}},
    {{{"tensors/2/sequence", "4097"}}, {"tensors[2] ('w'): field 'sequence' " MUST "1..4096"}},
    {{{"tensors/2/sequence", NULL}}, {"tensors[2] ('w'): missing field 'sequence'"}},
    {{{"tensors/2/dtype", "'bf16'"}}, {"tensors[2] ('w'): field 'dtype' must be f32, f16, f143 or f152, not 'bf16'"}},
    {{{"tensors/2/dtype", NULL}}, {"tensors[2] ('w'): missing field 'dtype'"}},
    {{{"tensors/0/scale", NULL}}, {"tensors[0] ('x'): field 'scale' must be an integer in -64..64 for an FP8"}},
    {{{"tensors/0/scale", "'0'"}}, {"tensors[0] ('x'): field 'scale' must be an integer in -64..64"}},
    {{{"tensors/0/scale", "1"}}, {"tensors[0] ('x'): field 'scale' must be an integer in -64..64 for an FP8 "
                                  "type and 0 otherwise"}},
    {{{"tensors/18/scale", "-65"}}, {"tensors[18] ('y8'): field 'scale' must be an integer in -64..64"}},
    {{{"tensors/18/scale", "65"}}, {"tensors[18] ('y8'): field 'scale' must be an integer in -64..64"}},
    {{{"tensors/17/role", "'weight'"}}, {"tensors[17] ('y'): field 'role' must be input, parameter, activation "
                                         "or output, not 'weight'"}},
    {{{"tensors/17/role", NULL}}, {"tensors[17] ('y'): missing field 'role'"}},
    {{{"tensors/0/values", NULL}}, {"tensors[0] ('x'): field 'values' is missing"}},
    {{{"tensors/1/values", "'given'"}}, {"tensors[1] ('c'): field 'values' applies to inputs and parameters only"}},
    {{{"tensors/3/name", "'x'"}}, {"tensors[3] ('x'): the name is also tensors[0]'s"}},
    {{{"tensors/0/values", "'random'"}}, {"tensors[0] ('x'): field 'values' must be \"given\" or {\"normal\""}},
    {{{"tensors/0/values", "3"}}, {"tensors[0] ('x'): field 'values' must be \"given\""}},
    {{{"tensors/0/values/uniform", "{}"}}, {"tensors[0] ('x'): field 'values' must be \"given\""}},
    {{{"tensors/0/values/normal", "1"}}, {"tensors[0] ('x'): field 'values' must be \"given\""}},
    {{{"tensors/0/values", "{'gaussian':{}}"}}, {"tensors[0] ('x'): field 'values' must be \"given\""}},
    {{{"tensors/0/values/normal/seed", "1"}}, {"tensors[0] ('x') values.normal: unknown field 'seed'"}},
    {{{"tensors/5/values/normal/scale", NULL}}, {"tensors[5] ('gamma') values.normal: missing field 'scale' "
                                                  "(a finite number)"}},
    {{{"tensors/5/values/normal/scale", "'1'"}}, {"tensors[5] ('gamma') values.normal: field 'scale' must be "
                                                  "a finite number"}},
    {{{"tensors/5/values/normal/offset", "1e39"}}, {"values.normal: field 'offset' must be a finite number"}},
    {{{"tensors/5/values/normal/stream", "-1"}}, {"values.normal: field 'stream' " MUST "0..9223372036854775807"}},
    /* ops */
    {{{"ops/2", "'layernorm'"}}, {"ops[2]: expected an object"}},
    {{{"ops/0/op", NULL}}, {"ops[0]: missing field 'op'"}},
    {{{"ops/0/op", "'conv'"}}, {"ops[0]: field 'op' must be matmul, gelu, add, cast, copy, layernorm, attention "
                                "or map_pool, not 'conv'"}},
    {{{"ops/0/epsilon", "0.5"}}, {"ops[0] (matmul): unknown field 'epsilon' (expected op, inputs and output)"}},
    {{{"ops/2/form", "'erf'"}}, {"ops[2] (layernorm): unknown field 'form' (expected op, inputs, output and "
                                 "epsilon)"}},
    {{{"ops/1/heads", "2"}}, {"ops[1] (gelu): unknown field 'heads' (expected op, inputs, output and form)"}},
    {{{"ops/5/epsilon", "0.5"}}, {"ops[5] (attention): unknown field 'epsilon' (expected op, inputs, output, "
                                  "heads, head_dim and seq)"}},
    {{{"ops/1/inputs", NULL}}, {"ops[1] (gelu): field 'inputs' must list 1 tensor names"}},
    {{{"ops/1/inputs", "'n'"}}, {"ops[1] (gelu): field 'inputs' must list 1 tensor names"}},
    {{{"ops/0/inputs", "['c']"}}, {"ops[0] (matmul): field 'inputs' must list 2 tensor names (3 with a bias)"}},
    {{{"ops/2/inputs/2", NULL}}, {"ops[2] (layernorm): field 'inputs' must list 3 tensor names"}},
    {{{"ops/1/inputs", "['n','n','n']"}}, {"ops[1] (gelu): field 'inputs' must list 1 tensor names"}},
    {{{"ops/0/inputs/1", "'wq'"}}, {"ops[0] (matmul): an input 'wq' is not a tensor of the description"}},
    {{{"ops/0/inputs/1", "5"}}, {"ops[0] (matmul): an input must be a tensor's name (a string)"}},
    {{{"ops/1/output", NULL}}, {"ops[1] (gelu): field 'output' must be a tensor's name (a string)"}},
    {{{"ops/1/output", "'out'"}}, {"ops[1] (gelu): field 'output' 'out' is not a tensor of the description"}},
    {{{"ops/2/epsilon", NULL}}, {"ops[2] (layernorm): missing field 'epsilon' (a finite number)"}},
    {{{"ops/2/epsilon", "'small'"}}, {"ops[2] (layernorm): field 'epsilon' must be a finite number"}},
    {{{"ops/1/form", "'exact'"}}, {"ops[1] (gelu): field 'form' must be \"tanh\" or \"erf\""}},
    {{{"ops/1/form", "1"}}, {"ops[1] (gelu): field 'form' must be \"tanh\" or \"erf\""}},
    {{{"ops/5/heads", "0"}}, {"ops[5] (attention): field 'heads' " MUST "1..4096"}},
    {{{"ops/5/head_dim", NULL}}, {"ops[5] (attention): missing field 'head_dim'"}},
    {{{"ops/6/seq", "0"}}, {"ops[6] (map_pool): field 'seq' " MUST "1..16777216"}},
    /* repeat */
    {{{"repeat", "3"}}, {"repeat: expected null or an object"}},
    {{{"repeat", "[]"}}, {"repeat: expected null or an object"}},
    {{{"repeat/body", "1"}}, {"repeat: unknown field 'body' (expected first_op, op_count"}},
    {{{"repeat/first_op", "9"}}, {"repeat: field 'first_op' " MUST "0..8"}},
    {{{"repeat/op_count", "0"}}, {"repeat: field 'op_count' " MUST "1..9"}},
    {{{"repeat/first_op", "4"}, {"repeat/op_count", "6"}}, {"repeat: field 'op_count' " MUST "1..5"}},
    {{{"repeat/iterations", "0"}}, {"repeat: field 'iterations' " MUST "1..4096"}},
    {{{"repeat/iterations", NULL}}, {"repeat: missing field 'iterations'"}},
    {{{"repeat/carried", "'h'"}}, {"repeat: field 'carried' 'h' is not a tensor of the description"}},
    {{{"repeat/carried_next", "7"}}, {"repeat: field 'carried_next' must be a tensor's name (a string)"}},
    {{{"repeat/carried_init", NULL}}, {"repeat: field 'carried_init' must be a tensor's name"}},
    /* well-formed, but the graph validator refuses the graph */
    {{{"tensors/2/rows", "9"}}, {"graph: op 0 (matmul): shapes 4x8 and others -> 4x8 do not agree"}},
    {{{"ops/5/heads", "3"}}, {"graph: op 5 (attention): shapes 4x24 -> 4x8 do not agree (with heads x head_dim"}},
    {{{"ops/7/output", "'x'"}}, {"graph: op 7 (cast) writes input 'x', which is read-only"}},
    {{{"ops/1/inputs", "['g']"}}, {"graph: op 1 (gelu) reads its own output 'g'"}},
    {{{"tensors/3/dtype", "'f32'"}}, {"graph: op 1 (gelu) mixes element types"}},
    {{{"repeat/iterations", "3"}}, {"graph: parameter sequence 'w' has 2 members for 3 iterations"}},
    {{{"repeat/carried_init", "'g'"}, {"ops/7/inputs", "['x']"}}, {"graph: the Repeat's carried_init 'g' must be a value from before"}},
};

static void test_malformed_descriptions_are_refused(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof BAD / sizeof *BAD; i++) {
        const bad_case *b = &BAD[i];
        json_t *doc = parse(BASE);
        for (int k = 0; k < 2 && b->changes[k].path; k++)
            doc = edit(doc, b->changes[k].path, b->changes[k].json);
        ipu_ctx *ctx = ipu_ctx_create();
        assert_non_null(ctx);
        ipu_workload *w = NULL;
        ipu_status status = create(ctx, doc, &w);
        const char *msg = ipu_ctx_errmsg(ctx);
        if (status != IPU_ERR_INVALID_ARGUMENT || w)
            TSEED_FAIL("case %zu (%s): %s, workload %p, message '%s'", i, b->changes[0].path,
                       ipu_status_name(status), (void *)w, msg);
        for (int k = 0; k < 2 && b->expect[k]; k++)
            if (!strstr(msg, b->expect[k]))
                TSEED_FAIL("case %zu (%s): message '%s' lacks '%s'", i, b->changes[0].path, msg, b->expect[k]);
        ipu_ctx_free(ctx);
    }
    /* The reader itself, handed no document at all. */
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = NULL;
    assert_int_equal(ipu_workload_from_description(ctx, NULL, &w), IPU_ERR_INVALID_ARGUMENT);
    assert_null(w);
    assert_non_null(strstr(ipu_ctx_errmsg(ctx), "graph description: expected a JSON object"));
    ipu_ctx_free(ctx);
}

/* The description reads back as written (canonical order, reals where the
 * writer writes reals); read again, it gives the same text. */
static void test_description_round_trips(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    json_t *base = parse(BASE);
    ipu_workload *w = NULL;
    TSEED_OK(ctx, create(ctx, json_incref(base), &w));
    json_t *back = info(ctx, w);
    if (!json_equal(back, base)) {
        char *text = json_dumps(back, JSON_COMPACT | JSON_SORT_KEYS);
        TSEED_FAIL("the description reads back differently: %s", text);
    }
    char *first = NULL, *second = NULL;
    TSEED_OK(ctx, ipu_workload_info_json(ctx, w, &first));
    ipu_workload *again = NULL;
    TSEED_OK(ctx, create(ctx, back, &again));
    TSEED_OK(ctx, ipu_workload_info_json(ctx, again, &second));
    assert_string_equal(first, second);
    ipu_free(first);
    ipu_free(second);
    ipu_workload_free(again);
    ipu_workload_free(w);
    json_decref(base);
    ipu_ctx_free(ctx);
}

/* Names at their length limits, the largest FP8 scale (on an f152 tensor)
 * and an explicit tanh GELU are accepted; the writer leaves the tanh form
 * out. */
static void test_limits_are_accepted(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    json_t *doc = parse(BASE);
    doc = edit(doc, "name", "'" N31 "'");
    doc = edit(doc, "tensors/14/name", "'" N63 "'");
    doc = edit(doc, "ops/6/inputs/0", "'" N63 "'");
    doc = edit(doc, "tensors/18/scale", "64");
    doc = edit(doc, "tensors/18/dtype", "'f152'");
    doc = edit(doc, "ops/1/form", "'tanh'");
    ipu_workload *w = NULL;
    TSEED_OK(ctx, create(ctx, doc, &w));
    json_t *back = info(ctx, w);
    assert_string_equal(json_string_value(json_object_get(back, "name")), N31);
    json_t *tensors = json_object_get(back, "tensors"), *ops = json_object_get(back, "ops");
    assert_string_equal(json_string_value(json_object_get(json_array_get(tensors, 14), "name")), N63);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(tensors, 18), "scale")), 64);
    assert_string_equal(json_string_value(json_object_get(json_array_get(tensors, 18), "dtype")), "f152");
    assert_string_equal(json_string_value(json_object_get(json_array_get(ops, 1), "op")), "gelu");
    assert_null(json_object_get(json_array_get(ops, 1), "form"));
    json_decref(back);
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
}

/* A graph without a Repeat, its tensors listed out of order: numbered
 * canonically (a, b, o), "repeat" null, and the given input takes values. */
static void test_small_graph_without_repeat(void **state)
{
    (void)state;
    ipu_ctx *ctx = ipu_ctx_create();
    ipu_workload *w = NULL;
    TSEED_OK(ctx, create(ctx, parse(SMALL), &w));
    json_t *back = info(ctx, w);
    assert_true(json_is_null(json_object_get(back, "repeat")));
    json_t *tensors = json_object_get(back, "tensors");
    assert_int_equal(json_array_size(tensors), 3);
    const char *order[] = {"a", "b", "o"};
    for (size_t i = 0; i < 3; i++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(tensors, i), "name")), order[i]);
    assert_string_equal(json_string_value(json_object_get(json_array_get(tensors, 0), "values")), "given");
    json_decref(back);
    float given[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    TSEED_OK(ctx, ipu_workload_set_values(ctx, w, "a", given, 8));
    const float *data = NULL;
    size_t count = 0;
    TSEED_OK(ctx, ipu_workload_values(ctx, w, "a", &data, &count));
    assert_int_equal(count, 8);
    assert_memory_equal(data, given, sizeof given);
    /* b's values are generated: it takes none. */
    assert_int_equal(ipu_workload_set_values(ctx, w, "b", given, 8), IPU_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ipu_ctx_errmsg(ctx), "tensor 'b': its values are generated (normal, stream 1)"));
    ipu_workload_free(w);
    ipu_ctx_free(ctx);
}

int main(void)
{
    tseed_init("test_graph_description_errors");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_malformed_descriptions_are_refused),
        cmocka_unit_test(test_description_round_trips),
        cmocka_unit_test(test_limits_are_accepted),
        cmocka_unit_test(test_small_graph_without_repeat),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
