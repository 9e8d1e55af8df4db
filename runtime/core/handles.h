/*
 * handles.h -- private: the registry of live handles.
 *
 * Every storage and tensor handle the library gives out is registered here and
 * removed when freed. Public functions look a handle up before touching it, so a
 * freed (or never-created) pointer passed back in is refused with
 * TT_ERR_INVALID_HANDLE instead of being dereferenced. If the allocator reuses
 * an address for a new object, the stale pointer aliases the new object: that
 * case is not detectable, which is why the header says "where detectable".
 */
#pragma once
#include <mutex>
#include <unordered_set>

namespace tt {

class HandleRegistry {
public:
    void add(const void *p) {
        std::lock_guard<std::mutex> lock(mu_);
        live_.insert(p);
    }
    void remove(const void *p) {
        std::lock_guard<std::mutex> lock(mu_);
        live_.erase(p);
    }
    bool contains(const void *p) {
        std::lock_guard<std::mutex> lock(mu_);
        return live_.count(p) != 0;
    }

private:
    std::mutex mu_;
    std::unordered_set<const void *> live_;
};

}  // namespace tt
