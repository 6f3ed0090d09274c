#pragma once

// One page of rows in id order. Stores read limit + 1 rows: the extra one
// only tells that another page exists.
#include <cstdint>
#include <vector>

namespace outbox {

template <typename T>
struct Page {
  std::vector<T> items;
  int64_t next_cursor = 0;  // id of the last item when another page follows; 0 on the last
};

// Turns limit + 1 rows read in id order into a page. `id_of(item)` gives the
// cursor of an item.
template <typename T, typename IdOf>
Page<T> MakePage(std::vector<T> rows, int limit, IdOf id_of) {
  Page<T> page;
  page.items = std::move(rows);
  if (limit >= 0 && page.items.size() > static_cast<size_t>(limit)) {
    page.items.resize(limit);
    page.next_cursor = page.items.empty() ? 0 : id_of(page.items.back());
  }
  return page;
}

}  // namespace outbox
