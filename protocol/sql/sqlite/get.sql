SELECT * FROM cairnq_tasks WHERE id = :id;
