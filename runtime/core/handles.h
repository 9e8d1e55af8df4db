/*
 * handles.h -- private: the tables that turn public handles into objects.
 *
 * A handle the library gives out (tt_storage_t *, tt_tensor_t *) is not the address
 * of the object: it is a token, a number drawn from one process-wide counter that
 * never repeats, shaped like an aligned non-NULL pointer. Each table maps live tokens
 * to objects. Public functions look the token up before touching anything, so a
 * freed handle is refused with TT_ERR_INVALID_HANDLE even after the allocator has
 * reused the object's memory for a new one (the new one has a new token), and a
 * storage handle passed where a tensor is expected is refused too (the counter is
 * shared, so the two tables never hold the same token).
 *
 * Looking a token up takes the table's mutex; the returned object stays valid until
 * the caller (or another thread misusing the same handle) frees it.
 */
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace tt {

/* A fresh token: 64 * (a counter that starts at 1 and never repeats in practice). */
inline uintptr_t next_handle_token() {
    static std::atomic<uintptr_t> counter{1};
    return counter.fetch_add(1, std::memory_order_relaxed) * 64;
}

template <class Object>
class HandleTable {
public:
    /* Register obj under a new token and return the token. */
    uintptr_t add(Object *obj) {
        const uintptr_t token = next_handle_token();
        std::lock_guard<std::mutex> lock(mu_);
        live_[token] = obj;
        return token;
    }
    /* The object behind a live token, or nullptr. */
    Object *lookup(const void *handle) {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = live_.find(reinterpret_cast<uintptr_t>(handle));
        return it == live_.end() ? nullptr : it->second;
    }
    /* Unregister a token; later lookups of it fail. */
    void remove(uintptr_t token) {
        std::lock_guard<std::mutex> lock(mu_);
        live_.erase(token);
    }

private:
    std::mutex mu_;
    std::unordered_map<uintptr_t, Object *> live_;
};

}  // namespace tt
