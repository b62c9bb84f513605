/* Which categories a data set uses, and the warning a tool prints when it uses fewer than the
 * model has (0/1 images in a model of 256 categories). */
#include <stdio.h>

#include "base/fail.h"
#include "pc/learn.h"

pc_status pc_learn_category_use(const pc_data *data, int32_t num_cats, pc_category_use *use) {
    if (!data || !use || (!data->values && data->count > 0))
        return pc_fail(PC_ERR_ARG, "category use: NULL argument");
    if (num_cats < 1 || num_cats > 256)
        return pc_fail(PC_ERR_ARG, "category use: num_cats = %d is not in 1..256", num_cats);
    int64_t seen[256] = {0};
    const int64_t width = data->width;
    for (int64_t r = 0; r < data->count; r++) {
        const uint8_t *x = data->values + r * width;
        const uint8_t *miss = data->missing ? data->missing + r * width : NULL;
        for (int64_t v = 0; v < width; v++) {
            if (miss && miss[v]) continue;
            if (x[v] >= num_cats)
                return pc_fail(PC_ERR_DATA,
                               "category use: value %d at row %lld, variable %lld is not below "
                               "num_cats = %d",
                               x[v], (long long)r, (long long)v, num_cats);
            seen[x[v]]++;
        }
    }
    *use = (pc_category_use){.observed = 0, .used = 0, .max_value = -1};
    for (int32_t c = 0; c < 256; c++) {
        if (!seen[c]) continue;
        use->observed += seen[c];
        use->used++;
        use->max_value = c;
    }
    return PC_OK;
}

int pc_learn_category_warning(const pc_category_use *use, int32_t num_cats, char *text,
                              size_t len) {
    if (text && len) text[0] = '\0';
    if (!use || !text || !len || use->used >= num_cats) return 0;
    snprintf(text, len,
             "the data uses %d of the model's %d categories (largest value %d): the unused "
             "ones keep only their pseudocount's probability, and bits/dim are those of %d "
             "categories",
             use->used, num_cats, use->max_value, num_cats);
    return 1;
}
