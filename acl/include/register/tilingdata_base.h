/*
 * register/tilingdata_base.h — CANN's macros for a tiling-data class on the host:
 *
 *   namespace optiling {
 *   BEGIN_TILING_DATA_DEF(AddCustomTilingData)
 *     TILING_DATA_FIELD_DEF(uint32_t, totalLength);
 *     TILING_DATA_FIELD_DEF_ARR(uint32_t, 4, tiles);
 *     TILING_DATA_FIELD_DEF_STRUCT(TCubeTiling, cubeTilingData);   // optiling::TCubeTiling
 *   END_TILING_DATA_DEF;
 *   REGISTER_TILING_DATA_CLASS(AddCustom, AddCustomTilingData)
 *   }
 *
 * Each field gets set_NAME / get_NAME (an array's setter copies all of it, its getter gives
 * the array), a struct field is its tiling class, reached by name (`cubeTilingData.set_M(..)`);
 * GetDataSize() is the bytes the kernel reads and SaveToBuffer(buf, capacity) copies them. The
 * bytes are laid out as the plain C struct of the same fields in the same order (each at its
 * natural alignment): the struct a kernel file declares for GET_TILING_DATA_WITH_STRUCT /
 * REGISTER_TILING_DEFAULT. REGISTER_TILING_DATA_CLASS registers the class with CANN's graph
 * engine, which npusim does not have: it declares nothing.
 */
#ifndef NPUSIM_REGISTER_TILINGDATA_BASE_H
#define NPUSIM_REGISTER_TILINGDATA_BASE_H
#include <cstddef>
#include <cstdint>
#include <cstring>

#define BEGIN_TILING_DATA_DEF(class_name)                                                          \
    class class_name {                                                                             \
    public:                                                                                        \
        size_t GetDataSize() const { return sizeof(*this); }                                       \
        void SaveToBuffer(void *buf, size_t capacity) const {                                      \
            std::memcpy(buf, this, capacity < sizeof(*this) ? capacity : sizeof(*this));           \
        }

#define TILING_DATA_FIELD_DEF(type, name)                                                          \
    type name{};                                                                                   \
    void set_##name(type v) { name = v; }                                                          \
    type get_##name() const { return name; }

#define TILING_DATA_FIELD_DEF_ARR(type, len, name)                                                 \
    type name[len]{};                                                                              \
    void set_##name(const type *v) { std::memcpy(name, v, sizeof name); }                         \
    type *get_##name() { return name; }                                                            \
    const type *get_##name() const { return name; }

#define TILING_DATA_FIELD_DEF_STRUCT(type, name) type name{};

#define END_TILING_DATA_DEF }

#define REGISTER_TILING_DATA_CLASS(op_type, class_name)

#endif
